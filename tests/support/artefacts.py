"""The tests' artefact cache: what the test machines once kept on disk (a CUDA torch wheel,
NVIDIA's toolkit wheels) comes from PyPI, through pip, once, into ``cache_dir()``:
``$FDL_TEST_CACHE``, else ``${XDG_CACHE_HOME:-$HOME/.cache}/fdl-tests``
(``scripts/setup-machine.sh`` keeps the wheels of its nvcc there too).

A test that cannot get its artefact skips where artefacts are optional and fails where
they are required: in CI (``FDL_REQUIRE_DOCKER=1``, which ``.ci/run`` sets) or with
``FDL_REQUIRE_ARTEFACTS=1``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from tests.support import downloads


def cache_dir() -> Path:
    """``$FDL_TEST_CACHE``, else ``${XDG_CACHE_HOME:-$HOME/.cache}/fdl-tests``."""
    if os.environ.get("FDL_TEST_CACHE"):
        return Path(os.environ["FDL_TEST_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fdl-tests"


def artefacts_required() -> bool:
    """Whether a missing artefact fails the test (CI) rather than skipping it."""
    return "1" in (
        os.environ.get("FDL_REQUIRE_ALL"),
        os.environ.get("FDL_REQUIRE_DOCKER"),
        os.environ.get("FDL_REQUIRE_ARTEFACTS"),
    )


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test for want of an artefact; fail it where artefacts are required."""
    if artefacts_required():
        pytest.fail(
            f"{reason} (artefacts are required: FDL_REQUIRE_DOCKER=1 or FDL_REQUIRE_ARTEFACTS=1)",
            pytrace=False,
        )
    pytest.skip(reason)


def require_nvcc() -> str:
    """nvcc on PATH (CUDA 13.0's from ``scripts/setup-machine.sh``); skips the test without
    it, or fails it in CI."""
    found = shutil.which("nvcc")
    if found is None:
        skip_or_fail("nvcc is not on PATH (bash scripts/setup-machine.sh installs CUDA 13.0's)")
    return found


def cached_wheel(spec: str, wheels: Path) -> Path | None:
    """The newest wheel in ``wheels`` that satisfies ``spec`` and installs on this Python."""
    requirement = Requirement(spec)
    name, tags = canonicalize_name(requirement.name), set(sys_tags())
    found: list[tuple[Version, Path]] = []
    for path in wheels.glob("*.whl"):
        try:
            project, version, _, wheel_tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if project == name and version in requirement.specifier and wheel_tags & tags:
            found.append((version, path))
    return max(found)[1] if found else None


def download_wheel(spec: str) -> Path:
    """The wheel pip picks for ``spec`` (``torch==2.14.1``) on this Python, downloaded once
    into ``cache_dir()/wheels`` (``pip download --no-deps --only-binary=:all:``: pip checks
    the index's hash) and taken from there after.

    Raises:
        OSError: pip could not download it (its message's tail).
    """
    wheels = cache_dir() / "wheels"
    have = cached_wheel(spec, wheels)
    if have is not None:
        return have
    wheels.mkdir(parents=True, exist_ok=True)
    # pip saves into a folder of its own; the wheel is renamed into the cache when whole
    with tempfile.TemporaryDirectory(dir=wheels, prefix=".partial.") as partial:
        argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-cache-dir",
                "--no-deps", "--only-binary=:all:", "--dest", partial, spec]  # fmt: skip
        started = time.monotonic()
        got = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
        saved = sorted(Path(partial).glob("*.whl"))
        if got.returncode != 0 or len(saved) != 1:
            raise OSError(f"pip could not download {spec}: {got.stderr.strip()[-1500:]}")
        size, seconds = saved[0].stat().st_size, time.monotonic() - started
        downloads.note(saved[0].name, "the package index (pip download)", size, seconds)
        saved[0].rename(wheels / saved[0].name)
    return wheels / saved[0].name


def pypi_wheel(spec: str) -> Path:
    """:func:`download_wheel` in a test: skips it, or fails it in CI, when pip cannot."""
    try:
        return download_wheel(spec)
    except OSError as exc:
        skip_or_fail(str(exc))


def cached_dir(name: str, make: Callable[[Path], object]) -> Path:
    """``cache_dir()/name``, made once by ``make(folder)`` in a folder of its own and renamed
    into place when whole (what ``make`` raises leaves nothing behind)."""
    target = cache_dir() / name
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.partial."))
    try:
        make(partial)
        partial.rename(target)
    except OSError:
        if not target.is_dir():  # not another process's, made meanwhile
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target
