"""A real CPU libtorch for the tests: the CPU view of PyPI's torch wheel.

The tests that build and run C++ (and, later, Rust) programs need a real libtorch. PyPI's
x86_64 torch wheels are CUDA builds; ``fdl libtorch install --from-wheel --cpu`` reads
only what a CPU program loads out of them (torch 2.13.0: ~127 MiB of a 502 MiB wheel, and
two small NVIDIA wheels). The fdl under test makes it, every session; the byte ranges it
reads stay in the tests' cache directory (``$FDL_TEST_CACHE``, default
``~/.cache/fdl-tests``), so a second run downloads nothing.

Where the index cannot be reached the test is skipped, or fails when artefacts are
required (CI: ``FDL_REQUIRE_DOCKER=1`` or ``FDL_REQUIRE_ARTEFACTS=1``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NoReturn

from tests.support.artefacts import cache_dir, skip_or_fail

REPO = Path(__file__).resolve().parents[2]
TORCH = "2.13.0"  # the tests' C++ programs and fixtures ask for it


def fdl_cache() -> Path:
    """``FDL_CACHE_DIR`` for the installs the tests make: the byte ranges stay there."""
    return cache_dir() / "fdl"


def artefact_missing(why: str) -> NoReturn:
    """Skip, or fail where artefacts are required (CI)."""
    skip_or_fail(why)


def install_args(torch: str = TORCH) -> list[str]:
    return ["libtorch", "install", "--from-wheel", "--cpu", "--torch", torch]


def cpu_view_env(home: Path | None = None) -> dict[str, str]:
    """The environment of an fdl that installs the CPU view through the tests' cache."""
    env = {"FDL_CACHE_DIR": str(fdl_cache())}
    if home is not None:
        env["FDL_HOME"] = str(home)
    return env


def install_cpu_view(cwd: Path, *, home: Path | None = None, torch: str = TORCH) -> Path:
    """``fdl libtorch install --from-wheel --cpu --torch TORCH`` in ``cwd`` (a project:
    its ``libtorch/``; else ``home``'s), with the tests' cache; returns the variant path."""
    import subprocess

    environ = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    environ.update(cpu_view_env(home), PYTHONPATH=str(REPO), NO_COLOR="1")
    done = subprocess.run(
        [sys.executable, "-m", "fdl", *install_args(torch), "--json"],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if done.returncode == 5:  # the index or its file host cannot be reached
        artefact_missing(f"the CPU view of torch {torch} cannot be read: {done.stderr[-500:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(json.loads(done.stdout)["path"])
