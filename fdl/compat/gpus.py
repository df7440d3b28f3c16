"""GPU names to compute capabilities, for drivers that cannot report the capability.

Read from ``fdl/data/compat/gpus.yaml``. ``nvidia-smi`` of drivers before R510 has no
``compute_cap`` field (R470 is the last driver for Kepler); the name is all fdl has then.
"""

from __future__ import annotations

import re
from functools import cache

from fdl.compat._data import load_table
from fdl.compat.archs import Capability, parse_capability

__all__ = ["capability_from_name"]

_PREFIXES = re.compile(r"^(?:NVIDIA\s+|GeForce\s+|Tesla\s+)+", re.I)


@cache
def _patterns() -> tuple[tuple[re.Pattern[str], int, Capability], ...]:
    rows = []
    for entry in load_table("gpus")["gpus"]:
        capability = parse_capability(str(entry["capability"]))
        for name in entry["names"]:
            words = r"\s+".join(re.escape(part) for part in str(name).split())
            pattern = re.compile(rf"(?<![\w-]){words}(?!\w)", re.I)  # "A100-SXM4" is an A100
            rows.append((pattern, len(str(name)), capability))
    rows.sort(key=lambda row: -row[1])  # the longest name first: "GTX 1080 Ti" before "GTX 1080"
    return tuple(rows)


def capability_from_name(name: str) -> Capability | None:
    """The compute capability of a GPU called ``name`` (as nvidia-smi prints it), or None
    when the table does not know it."""
    short = _PREFIXES.sub("", name.strip())
    for pattern, _, capability in _patterns():
        if pattern.search(short):
            return capability
    return None
