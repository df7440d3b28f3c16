"""Official ROCm builds of libtorch: which release has which, for which AMD GPUs.

Read from ``fdl/data/compat/rocm.yaml``. A ROCm build is named like a CUDA one
(``rocm7.0``: the download bucket and the ``+rocm7.0`` of its build version) and installed
under ``precompiled/rocm70``, floDl's directory name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from fdl.compat._data import load_table, version_key
from fdl.errors import UsageError

__all__ = [
    "GfxTarget",
    "RocmBuild",
    "RocmChoice",
    "RocmRuntime",
    "choose_rocm_build",
    "gfx_processor",
    "gfx_sort_key",
    "parse_gfx",
    "rocm_build",
    "rocm_builds",
    "rocm_directory",
    "rocm_runtime_facts",
]

# An AMD GPU target id as LLVM writes it (AMDGPUUsage, "Target ID"): gfx, the major version
# (one or two digits), the minor (one digit), the stepping (one hex digit), then its target
# features in alphabetical order, each at most once (gfx90a:sramecc+:xnack-). The one parser
# of gfx names: offload bundles, the KFD survey, FLODL_TESTING_GPU_JSON, --rocm-archs.
_GFX = re.compile(
    r"gfx(?P<major>[1-9]|1[0-9])(?P<minor>[0-9])(?P<step>[0-9a-f])"
    r"(?P<features>(?::sramecc[+-])?(?::xnack[+-])?)"
)
_ROCM = re.compile(r"^(?:rocm)?(\d{1,2})\.(\d{1,2})$")


@dataclass(frozen=True)
class RocmBuild:
    """One official ROCm build of a torch release.

    Attributes:
        torch: The full release (``2.10.0``).
        name: ``rocm7.0``: the download bucket and build-version suffix.
        rocm: ``7.0``.
        gfx: The gfx processors it ships kernels for.
        default: The one chosen for AMD GPUs when none is asked for.
        glibc: The oldest glibc its libraries load with (None: not measured).
        source: Where the row comes from.
    """

    torch: str
    name: str
    rocm: str
    gfx: tuple[str, ...]
    default: bool
    glibc: str | None
    glibcxx: str | None
    source: str

    @property
    def directory(self) -> str:
        """``precompiled/rocm70``."""
        return rocm_directory(self.name)

    def covers(self, arch: str) -> bool:
        """Whether a GPU of ``arch`` (``gfx90a``, ``gfx90a:sramecc+:xnack-``) has kernels here."""
        return gfx_processor(arch) in self.gfx


@dataclass(frozen=True)
class RocmChoice:
    """The ROCm build for a machine's AMD GPUs, or why none.

    Attributes:
        build: The build (None: no build covers any of the GPUs; the CPU build is the way).
        covered: The GPUs' archs it covers.
        uncovered: Those it does not (unusable with it).
        reason: One line saying why.
    """

    build: RocmBuild | None
    covered: tuple[str, ...]
    uncovered: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class GfxTarget:
    """An AMD GPU target id: ``gfx90a:sramecc+:xnack-`` is processor ``gfx90a`` (major 9,
    minor 0, stepping 10) with features ``("sramecc+", "xnack-")``."""

    major: int
    minor: int
    stepping: int
    features: tuple[str, ...] = ()

    @property
    def processor(self) -> str:
        return f"gfx{self.major}{self.minor}{self.stepping:x}"

    def __str__(self) -> str:
        return ":".join((self.processor, *self.features))


def parse_gfx(text: str) -> GfxTarget | None:
    """The target id ``text`` names (``gfx1030``, ``GFX90A:xnack-``; surrounding blanks
    ignored), or None when it is not exactly one."""
    found = _GFX.fullmatch(text.strip().lower()) if len(text) < 64 else None
    if found is None:
        return None
    features = tuple(f for f in found.group("features").split(":") if f)
    major, minor, step = (found.group(k) for k in ("major", "minor", "step"))
    return GfxTarget(int(major), int(minor), int(step, 16), features)


def gfx_processor(arch: str) -> str:
    """``gfx90a`` from a target id (``gfx90a:sramecc+:xnack-``); ``""`` when not a gfx name."""
    target = parse_gfx(arch)
    return target.processor if target else ""


def gfx_sort_key(arch: str) -> tuple[int, int, int]:
    """gfx names sort by generation (``gfx908`` < ``gfx90a`` < ``gfx942`` < ``gfx1030``);
    what is not a gfx name sorts last."""
    target = parse_gfx(arch)
    return (target.major, target.minor, target.stepping) if target else (1 << 30, 0, 0)


def rocm_directory(name: str) -> str:
    """Where a ROCm build is installed: ``precompiled/rocm70`` for ``rocm7.0``."""
    return "precompiled/" + name.replace(".", "")


@cache
def _builds() -> tuple[RocmBuild, ...]:
    table = load_table("rocm")
    found: list[RocmBuild] = []
    for row in table["releases"]:
        for patch in row["patches"]:
            found += [_build(str(patch), entry) for entry in row["builds"]]
    return tuple(found)


def _build(torch: str, entry: dict[str, Any]) -> RocmBuild:
    return RocmBuild(
        torch=torch,
        name=str(entry["name"]),
        rocm=str(entry["rocm"]),
        gfx=tuple(str(g) for g in entry["gfx"]),
        default=bool(entry.get("default", False)),
        glibc=str(entry["glibc"]) if entry.get("glibc") else None,
        glibcxx=str(entry["glibcxx"]) if entry.get("glibcxx") else None,
        source=str(entry["source"]),
    )


def rocm_builds(torch: str | None = None) -> tuple[RocmBuild, ...]:
    """The ROCm builds of release ``torch`` (``2.10`` or ``2.10.0``), or of every release."""
    if torch is None:
        return _builds()
    return tuple(b for b in _builds() if _same_release(b.torch, torch))


def _same_release(full: str, asked: str) -> bool:
    return full == asked or full.rsplit(".", 1)[0] == asked


def _released_with_rocm() -> str:
    return ", ".join(sorted({b.torch for b in _builds()}, key=version_key))


def rocm_build(torch: str, rocm: str) -> RocmBuild:
    """The build of ``torch`` for ROCm ``rocm`` (``7.0`` or ``rocm7.0``).

    Raises:
        UsageError: a malformed ROCm version, or a release without that build.
    """
    match = _ROCM.match(rocm.strip())
    if match is None:
        raise UsageError(
            f"--rocm {rocm!r} is not a ROCm version", hint="give MAJOR.MINOR, e.g. --rocm 7.0"
        )
    wanted = f"{int(match.group(1))}.{int(match.group(2))}"
    builds = rocm_builds(torch)
    for build in builds:
        if build.rocm == wanted:
            return build
    if not builds:
        raise UsageError(
            f"torch {torch} has no official ROCm libtorch known to fdl",
            hint=f"releases with ROCm builds: {_released_with_rocm()} "
            f"(fdl libtorch download --rocm 7.0 --torch 2.10.0)",
        )
    offered = ", ".join(b.rocm for b in builds)
    raise UsageError(
        f"torch {torch} has no ROCm {wanted} libtorch (it has ROCm {offered})",
        hint=f"fdl libtorch download --rocm {builds[0].rocm} --torch {builds[0].torch}",
    )


def choose_rocm_build(torch: str, archs: Sequence[str]) -> RocmChoice:
    """The ROCm build for AMD GPUs of ``archs``: the release's default (the oldest 7.x,
    which loads on every 7.x host runtime) when it covers at least one of them."""
    builds = rocm_builds(torch)
    default = next((b for b in builds if b.default), builds[0] if builds else None)
    if default is None:
        return RocmChoice(None, (), tuple(archs), f"torch {torch} has no official ROCm libtorch")
    covered = tuple(a for a in archs if default.covers(a))
    uncovered = tuple(a for a in archs if not default.covers(a))
    if not covered:
        return RocmChoice(
            None,
            (),
            uncovered,
            f"the ROCm build of torch {torch} has no kernels for {_names(uncovered)} "
            f"(it covers {' '.join(default.gfx)})",
        )
    reason = f"AMD GPU(s) {_names(covered)}: ROCm {default.rocm}, the oldest 7.x build"
    if uncovered:
        reason += f"; {_names(uncovered)} not covered (unusable with it)"
    return RocmChoice(default, covered, uncovered, reason)


def _names(archs: Iterable[str]) -> str:
    return ", ".join(archs)


@dataclass(frozen=True)
class RocmRuntime:
    """Where a machine's ROCm runtime is looked for, and its library directory, which goes
    before a ROCm libtorch's own ``lib/`` (``rocm.yaml``'s ``runtime``)."""

    path_env: tuple[str, ...]
    default_root: str
    library_dir: str

    def library(self, root: str) -> str:
        return self.library_dir.format(rocm=root.rstrip("/"))


@cache
def rocm_runtime_facts() -> RocmRuntime:
    runtime = load_table("rocm")["runtime"]
    return RocmRuntime(
        tuple(str(k) for k in runtime["rocm_path_env"]),
        str(runtime["rocm_path_default"]),
        str(runtime["library_dir"]),
    )
