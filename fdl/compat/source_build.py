"""What building a PyTorch release from source accepts: the CUDA toolkits its CMake takes,
the arch names its TORCH_CUDA_ARCH_LIST parses (``build_constraints`` in pytorch.yaml), the
toolkit to build with, and the releases that build for some GPUs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fdl.compat._data import load_table, version_key
from fdl.compat.archs import ArchList, Target
from fdl.compat.cuda import check_driver, compilable_toolkits
from fdl.compat.pytorch import (
    release,
    releases,
    resolve_torch_version,
)
from fdl.errors import UsageError

__all__ = [
    "BuildConstraints",
    "ToolkitChoice",
    "build_constraints",
    "buildable_toolkits",
    "preferred_toolkit",
    "releases_that_build",
    "tested_cuda",
]


@dataclass(frozen=True)
class BuildConstraints:
    """What building PyTorch ``torch`` from source accepts (``build_constraints`` in
    pytorch.yaml), each rule with its source.

    Attributes:
        torch: The release (``2.10.0``).
        cuda_min: The oldest CUDA its CMake accepts.
        cuda_major_max: The newest CUDA major it builds with.
        two_digit_major: Whether TORCH_CUDA_ARCH_LIST takes ``10.0``/``12.0``.
        suffixes: The arch suffixes its parser takes (``a``; no release takes ``f``).
        sources: Where each rule comes from, for messages and ``--json``.
    """

    torch: str
    cuda_min: str
    cuda_major_max: int
    two_digit_major: bool
    suffixes: frozenset[str]
    sources: tuple[str, ...]

    def cuda_problem(self, cuda: str) -> str | None:
        """Why toolkit ``cuda`` cannot build this release, or None."""
        if version_key(cuda) < version_key(self.cuda_min):
            return f"torch {self.torch} needs CUDA {self.cuda_min} or newer (its CMake stops)"
        if version_key(cuda)[0] > self.cuda_major_max:
            return f"torch {self.torch} builds with CUDA {self.cuda_major_max}.x at most"
        return None

    def arch_problem(self, target: Target) -> str | None:
        """Why this release's TORCH_CUDA_ARCH_LIST cannot name ``target``, or None."""
        if target.capability.major >= 10 and not self.two_digit_major:
            return (
                f"torch {self.torch}'s TORCH_CUDA_ARCH_LIST takes one-digit majors only, so "
                f"{target.capability} is an unknown arch to it"
            )
        if target.suffix and target.suffix not in self.suffixes:
            kind = "family" if target.suffix == "f" else "arch-specific"
            return (
                f"torch {self.torch}'s TORCH_CUDA_ARCH_LIST takes no {kind} targets "
                f"({target.capability}{target.suffix})"
            )
        return None


def _in_force(entries: Iterable[dict[str, Any]], version: str) -> dict[str, Any]:
    """The entry of a ``since``-ordered list that applies to ``version``."""
    chosen: dict[str, Any] | None = None
    for entry in entries:
        since = version_key(str(entry["since"]))
        if version_key(version) >= since and (
            chosen is None or since >= version_key(str(chosen["since"]))
        ):
            chosen = entry
    if chosen is None:
        raise UsageError(
            f"fdl's tables have no source-build rules for torch {version}",
            hint="build a release fdl knows (fdl libtorch build --torch 2.10, ...)",
        )
    return chosen


def build_constraints(version: str | None = None) -> BuildConstraints:
    """The source-build rules of PyTorch ``version`` (the newest known when None)."""
    full = resolve_torch_version(version)
    table = load_table("pytorch")["build_constraints"]
    cuda_min = _in_force(table["cuda_min"], full)
    major = _in_force(table["cuda_major_max"], full)
    grammar = _in_force(table["arch_list"], full)
    return BuildConstraints(
        torch=full,
        cuda_min=str(cuda_min["value"]),
        cuda_major_max=int(major["value"]),
        two_digit_major=bool(grammar["two_digit_major"]),
        suffixes=frozenset(str(grammar.get("suffixes", ""))),
        sources=tuple(" ".join(str(e["source"]).split()) for e in (cuda_min, major, grammar)),
    )


def buildable_toolkits(version: str | None, archs: ArchList) -> list[Any]:
    """The toolkits that compile every target of ``archs`` and build ``version``, newest
    first (empty when the release cannot target one of them at all)."""
    rules = build_constraints(version)
    if any(rules.arch_problem(t) for t in archs):
        return []
    return [kit for kit in compilable_toolkits(archs) if rules.cuda_problem(kit.version) is None]


def tested_cuda(version: str | None) -> str | None:
    """The newest CUDA of the release's official builds: the newest toolkit PyTorch's own
    release builds were made (and tested) with."""
    cudas = [v.cuda for v in release(version).variants if v.cuda]
    return max(cudas, key=version_key) if cudas else None


@dataclass(frozen=True)
class ToolkitChoice:
    """The toolkit a source build of a release for some archs uses, and why.

    Every place that names a source build's CUDA (the build plan, ``fdl setup``,
    ``fdl diagnose``, the native preflight's fix) asks :func:`preferred_toolkit`, so they all
    give the same toolkit with the same reason.

    Attributes:
        kit: The toolkit.
        why: One line: why this one.
        note: A caveat (only a toolkit newer than the release's own builds can, or the
            driver runs none of them), or None.
        driver_needed: The driver the chosen toolkit's code needs when this machine's is
            older, else None.
    """

    kit: Any
    why: str
    note: str | None = None
    driver_needed: str | None = None

    @property
    def version(self) -> str:
        return str(self.kit.version)


def preferred_toolkit(
    version: str | None, archs: ArchList, driver: str | None = None
) -> ToolkitChoice:
    """The toolkit to build ``version`` for ``archs`` with: the newest that compiles them,
    builds the release, is no newer than its official builds' and (when ``driver`` is
    given) runs on that driver.

    Raises:
        IndexError: nothing builds it (check with :func:`buildable_toolkits` first).
    """
    full = resolve_torch_version(version)
    kits = buildable_toolkits(full, archs)
    newest_tested = tested_cuda(full)
    tested = [
        k
        for k in kits
        if newest_tested is None or version_key(k.version) <= version_key(newest_tested)
    ]
    codes = " ".join(archs.codes())
    note: str | None = None
    if tested:
        chosen = tested
        why = (
            f"the newest toolkit that compiles {codes} and is no newer than torch {full}'s "
            f"release builds (CUDA {newest_tested})"
        )
    else:
        chosen = kits[:1]
        why = f"the only toolkits that compile {codes} and build torch {full} are newer than its release builds"
        note = (
            f"CUDA {kits[0].version} is newer than any official build of torch {full} (CUDA "
            f"{newest_tested} at most): PyTorch's own release builds never used it"
        )
    kit = chosen[0]
    if driver is None:
        return ToolkitChoice(kit, why, note)
    runs = [k for k in chosen if check_driver(driver, k.version).ok]
    if runs:  # newer toolkits need newer drivers: the first that runs is the newest
        if runs[0] is not kit:
            why = (
                f"the newest toolkit that compiles {codes}, builds torch {full} and runs on "
                f"driver {driver}"
            )
        return ToolkitChoice(runs[0], why, note)
    needed = check_driver(driver, kit.version).required
    return ToolkitChoice(kit, why, note, needed)


def releases_that_build(archs: ArchList) -> list[str]:
    """The newest patch of every known release that can be built for ``archs``, newest
    first: what to suggest when the asked-for release cannot."""
    return [r.latest for r in reversed(releases()) if buildable_toolkits(r.latest, archs)]
