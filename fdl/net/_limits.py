"""Bounds on what a registry may make fdl read, write or repeat, each raised by an
``FDL_REGISTRY_MAX_*`` variable.

A registry is remote input: an endless error body, a manifest of 300 layers, a tags
``Link`` that names itself, a small gzip layer that inflates to gigabytes. Each bound is
far above what ``fdl libtorch push`` writes, is named in the error that stops at it, and
the error says how to raise it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from fdl.errors import UsageError

__all__ = [
    "MAX_BODY",
    "MAX_LAYER",
    "MAX_LAYERS",
    "MAX_PAGES",
    "MAX_RATIO",
    "RATIO_FLOOR",
    "Limit",
]

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Limit:
    """One bound: its variable, its default, and what it counts."""

    env: str
    default: int
    counts: str  # "bytes", "layers", "pages", "times the layer's size"

    def value(self, environ: Mapping[str, str] | None = None) -> int:
        """The bound (``$env``, default ``default``; sizes may end in K, M, G or T).

        Raises:
            UsageError: the variable is not a positive whole number.
        """
        text = (os.environ if environ is None else environ).get(self.env, "").strip()
        if not text:
            return self.default
        number, unit = text.rstrip("iIbB"), ""
        if number and number[-1].lower() in _UNITS and self.counts == "bytes":
            number, unit = number[:-1], number[-1].lower()
        if not number.isdigit() or int(number) <= 0:
            raise UsageError(
                f"{self.env}={text!r} is not a positive number of {self.counts}",
                hint=f"set it to a number such as {self.env}={self.shown(self.default)}, "
                "or unset it",
            )
        return int(number) * _UNITS[unit]

    def shown(self, value: int) -> str:
        if self.counts != "bytes":
            return str(value)
        for unit in ("T", "G", "M", "K"):
            if value >= _UNITS[unit.lower()] and value % _UNITS[unit.lower()] == 0:
                return f"{value // _UNITS[unit.lower()]}{unit}"
        return str(value)

    def hint(self, value: int) -> str:
        """How to raise the bound, for the error that stopped at it."""
        return (
            f"if the registry is trusted and this is expected, raise the bound: "
            f"{self.env}={self.shown(value * 4)} (now {self.shown(value)} {self.counts})"
        )


# A manifest, config, tags page, token reply or error body (fdl's are a few KiB).
MAX_BODY = Limit("FDL_REGISTRY_MAX_BODY", 4 << 20, "bytes")
# One compressed layer (a CUDA libtorch's libraries are about 3 GiB with zstd).
MAX_LAYER = Limit("FDL_REGISTRY_MAX_LAYER", 16 << 30, "bytes")
# Layers in one image (fdl pushes 3).
MAX_LAYERS = Limit("FDL_REGISTRY_MAX_LAYERS", 16, "layers")
# Pages of one tags listing (1000 tags a page).
MAX_PAGES = Limit("FDL_REGISTRY_MAX_PAGES", 100, "pages")
# How many times its compressed size a layer may unpack to (libraries: 2-4x, headers:
# about 8x), above RATIO_FLOOR; a gzip of zeros is 1000x.
MAX_RATIO = Limit("FDL_REGISTRY_MAX_RATIO", 32, "times the layer's size")
RATIO_FLOOR = 64 << 20
