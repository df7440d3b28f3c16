"""What the test machine must have, and the one switch that makes its absence a failure.

A test whose service or tool is missing skips (a laptop has no SLURM). With
``FDL_REQUIRE_ALL=1`` (``.ci/run`` sets it) every skip becomes a failure, except the few in
:data:`SKIPS_THAT_STAY` (the README's Development section lists them with their reason):
the registry, SLURM, sccache-dist, redis, root, the package index, docker and every tool
``scripts/setup-machine.sh`` installs cannot go missing unnoticed. tests/conftest.py
applies it to every skip, those to come included.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["REQUIRE_ALL", "SKIPS_THAT_STAY", "require_all", "required", "skip_or_fail", "stays"]

REQUIRE_ALL = "FDL_REQUIRE_ALL"

# (text of the skip's reason, why it may stay a skip on a machine that has everything)
SKIPS_THAT_STAY: tuple[tuple[str, str], ...] = (
    (
        "this machine has NVIDIA's driver library",
        "the fallback without NVML is checked where no NVIDIA driver is installed",
    ),
    ("not a runnable form", "a hint with a placeholder or a pipe (`fdl run NAME`), no command"),
    ("the fast path is Linux's", "the check of the Linux fast path, on other systems"),
    ("could not import 'tomllib'", "Python 3.10 has no tomllib (3.11 and newer do)"),
)


def require_all() -> bool:
    """Whether every skip for what the machine must have fails instead."""
    return os.environ.get(REQUIRE_ALL) == "1"


def required(what: str) -> bool:
    """Whether ``what`` (docker, slurm, artefacts) must be here: ``FDL_REQUIRE_ALL=1``, or
    its own ``FDL_REQUIRE_<WHAT>=1``."""
    return require_all() or os.environ.get(f"FDL_REQUIRE_{what.upper()}") == "1"


def stays(reason: str) -> bool:
    """Whether a skip with this reason stays a skip under ``FDL_REQUIRE_ALL=1``."""
    return any(text in reason for text, _ in SKIPS_THAT_STAY)


def skip_or_fail(what: str, problem: str) -> NoReturn:
    """Skip the test for want of ``what``; fail it where ``what`` is required."""
    if required(what):
        variable = REQUIRE_ALL if require_all() else f"FDL_REQUIRE_{what.upper()}"
        pytest.fail(
            f"{what} is required ({variable}=1) but {problem}; bash scripts/setup-machine.sh "
            "sets this machine up",
            pytrace=False,
        )
    pytest.skip(problem)
