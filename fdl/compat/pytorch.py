"""Official PyTorch releases: CUDA variants, the archs they contain, source-build needs.

Read from ``fdl/data/compat/pytorch.yaml``. :func:`choose_variant` answers "which official
build runs on these GPUs" with the reason, and says so when none does (sm_61 + sm_120).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from fdl.compat._data import load_table, prefix_matches, require, verified, version_key
from fdl.compat.archs import ArchList, Capability, Target, parse_archs, parse_capability
from fdl.compat.cuda import check_driver, compilable_toolkits, uncompilable_reason
from fdl.compat.rules import Verdict, covers
from fdl.errors import UsageError

__all__ = [
    "Observation",
    "Release",
    "SourceRequirements",
    "Variant",
    "VariantChoice",
    "choose_variant",
    "default_torch_version",
    "release",
    "releases",
    "resolve_torch_version",
    "source_requirements",
    "variant_targets",
]


@dataclass(frozen=True)
class Observation:
    """What a published binary really contains (read with :mod:`fdl.binaries`)."""

    version: str
    library: str
    targets: ArchList
    extra_kernels: ArchList


@dataclass(frozen=True)
class Variant:
    """One official build of a release: ``cu130``, ``cpu``.

    Attributes:
        name: The variant name used in URLs and wheel tags.
        cuda: Its CUDA toolkit (``13.0``), None for the CPU build.
        targets: The documented TORCH_CUDA_ARCH_LIST.
        cudnn: The cuDNN it was built with.
        default: True for the build ``pip install torch`` gets from PyPI.
        observed: Arch lists read from published binaries.
    """

    release: str
    name: str
    cuda: str | None
    targets: ArchList
    cudnn: str | None
    default: bool
    observed: tuple[Observation, ...] = ()

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None

    def targets_for(self, version: str) -> ArchList:
        """What the binary of ``version`` contains: observed if known, else documented."""
        for observation in self.observed:
            if observation.version == version:
                return observation.targets
        return self.targets


@dataclass(frozen=True)
class SourceRequirements:
    """What building a release from source needs."""

    cmake_min: str
    cxx_standard: int
    python_min: str
    verified: bool = True


@dataclass(frozen=True)
class Release:
    """A PyTorch minor release (``2.14``) and its known patch releases."""

    version: str
    patches: tuple[str, ...]
    source: SourceRequirements
    variants: tuple[Variant, ...]
    patches_verified: bool = True

    @property
    def latest(self) -> str:
        """The newest known patch release (``2.14.1``)."""
        return max(self.patches, key=version_key)

    def variant(self, name: str) -> Variant:
        """The variant called ``name``.

        Raises:
            UsageError: the release has no such build.
        """
        for variant in self.variants:
            if variant.name == name:
                return variant
        names = ", ".join(v.name for v in self.variants)
        raise UsageError(
            f"PyTorch {self.version} has no official {name} build", hint=f"available: {names}"
        )


@dataclass(frozen=True)
class VariantChoice:
    """The official build chosen for a set of GPUs, or why there is none.

    Attributes:
        torch_version: The full torch version considered (``2.14.1``).
        variant: The chosen build, None when no official build covers every GPU.
        verdicts: How each GPU runs the chosen build.
        reason: One line for a user.
        rejected: (variant name, why) for every build not chosen.
        build_toolkits: When none fits, the CUDA versions that can compile all the GPUs.
    """

    torch_version: str
    variant: Variant | None
    verdicts: tuple[Verdict, ...]
    reason: str
    rejected: tuple[tuple[str, str], ...] = ()
    build_toolkits: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.variant is not None


def _variant(release_version: str, entry: dict[str, Any]) -> Variant:
    where = f"pytorch.yaml {release_version} {entry.get('name')}"
    observed = tuple(
        Observation(
            str(o["version"]),
            str(o.get("library", "")),
            parse_archs(str(o["archs"])) if o.get("archs") else ArchList(),
            parse_archs(str(o["extra_kernels"])) if o.get("extra_kernels") else ArchList(),
        )
        for o in entry.get("observed") or ()
    )
    cuda = entry.get("cuda")
    return Variant(
        release=release_version,
        name=str(require(entry, "name", where)),
        cuda=str(cuda) if cuda is not None else None,
        targets=parse_archs(str(entry["archs"])) if entry.get("archs") else ArchList(),
        cudnn=str(entry["cudnn"]) if entry.get("cudnn") else None,
        default=bool(entry.get("default", False)),
        observed=observed,
    )


@cache
def releases() -> tuple[Release, ...]:
    """Every known release, oldest first."""
    result = []
    for entry in load_table("pytorch")["releases"]:
        version = str(require(entry, "version", "pytorch.yaml release"))
        source = require(entry, "source", f"pytorch.yaml {version}")
        result.append(
            Release(
                version=version,
                patches=tuple(str(p) for p in require(entry, "patches", version)),
                source=SourceRequirements(
                    str(source["cmake_min"]),
                    int(source["cxx_standard"]),
                    str(source["python_min"]),
                    verified(source),
                ),
                variants=tuple(_variant(version, v) for v in entry["variants"]),
                patches_verified=entry.get("patches_verified", True) is not False,
            )
        )
    return tuple(sorted(result, key=lambda r: version_key(r.version)))


def release(version: str | None = None) -> Release:
    """The release of ``2.14`` or ``2.14.1`` (the newest when None).

    Raises:
        UsageError: unknown release.
    """
    if version is None:
        return releases()[-1]
    try:
        key = version_key(version)
    except ValueError:
        key = ()
    for candidate in releases():
        if key and len(key) >= 2 and prefix_matches(version, candidate.version):
            return candidate
    known = ", ".join(r.version for r in releases())
    raise UsageError(f"unknown PyTorch version {version!r}", hint=f"known releases: {known}")


def resolve_torch_version(version: str | None = None) -> str:
    """A full version: None -> newest known, ``2.8`` -> ``2.8.0``, ``2.8.0+cu128`` -> ``2.8.0``.

    A patch release newer than the table knows (``2.14.3``) is accepted as given.
    """
    rel = release(version)
    if version is None or len(version_key(version)) < 3:
        return rel.latest
    return ".".join(str(p) for p in version_key(version)[:3])


def default_torch_version() -> str:
    """The newest known PyTorch release (the default everywhere)."""
    return releases()[-1].latest


def source_requirements(version: str | None = None) -> SourceRequirements:
    """Minimum CMake, C++ standard and Python to build ``version`` from source."""
    return release(version).source


def variant_targets(version: str | None, variant: str) -> ArchList:
    """The archs the official ``variant`` binary of ``version`` contains."""
    full = resolve_torch_version(version)
    return release(full).variant(variant).targets_for(full)


def _quality(verdicts: list[Verdict]) -> int:
    return max(v.match.rank for v in verdicts)


def choose_variant(
    gpus: Iterable[Capability | str],
    torch_version: str | None = None,
    *,
    driver: str | None = None,
) -> VariantChoice:
    """The official build that runs on every GPU, or why none does.

    Preference among builds that cover every GPU: native cubins over compatible cubins over
    PTX JIT, then PyPI's default build, then the newest CUDA. Builds the driver is too old
    for are rejected. No GPU: the CPU build.

    Args:
        gpus: Capabilities of the GPUs (``"6.1"``, ``Capability(12, 0)``).
        torch_version: ``2.14`` / ``2.14.1``; the newest known when None.
        driver: The NVIDIA driver version, to reject builds that need a newer one.
    """
    full = resolve_torch_version(torch_version)
    rel = release(full)
    caps = sorted({parse_capability(g) if isinstance(g, str) else g for g in gpus})
    if not caps:
        cpu = next(v for v in rel.variants if v.is_cpu)
        return VariantChoice(full, cpu, (), "no NVIDIA GPU: the CPU build")
    fitting: list[tuple[_Rank, Variant, list[Verdict]]] = []
    rejected: list[tuple[str, str]] = []
    for variant in rel.variants:
        if variant.is_cpu:
            continue
        assessed = _assess(variant, full, caps, driver)
        if isinstance(assessed, str):
            rejected.append((variant.name, assessed))
        else:
            fitting.append((assessed[0], variant, assessed[1]))
    if fitting:
        fitting.sort(key=lambda item: item[0])
        _, chosen, verdicts = fitting[0]
        chosen_rejects = [(v.name, "covers the GPUs, but ranked lower") for _, v, _ in fitting[1:]]
        return VariantChoice(
            full, chosen, tuple(verdicts), _why(chosen, verdicts), tuple(rejected + chosen_rejects)
        )
    return _none_fits(full, caps, rejected, driver)


_Rank = tuple[int, int, tuple[int, ...]]


def _assess(
    variant: Variant, full: str, caps: list[Capability], driver: str | None
) -> tuple[_Rank, list[Verdict]] | str:
    """How well ``variant`` fits the GPUs (lower rank is better), or why it does not."""
    assert variant.cuda is not None
    verdicts = covers(variant.targets_for(full), caps)
    missing = [v for v in verdicts if not v.ok]
    if missing:
        return f"no code for {', '.join(v.gpu.label() for v in missing)}"
    if driver is not None and not (check := check_driver(driver, variant.cuda)).ok:
        return check.reason
    cuda = tuple(-p for p in version_key(variant.cuda))
    return (_quality(verdicts), 0 if variant.default else 1, cuda), verdicts


def _or_join(items: list[str], word: str) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _why(variant: Variant, verdicts: list[Verdict]) -> str:
    how = "; ".join(f"{v.gpu.sm}: {v.reason}" for v in verdicts)
    return f"{variant.name} runs on every GPU ({how})"


def _none_fits(
    full: str, caps: list[Capability], rejected: list[tuple[str, str]], driver: str | None
) -> VariantChoice:
    archs = ArchList.of(Target(c) for c in caps)
    able = tuple(
        t.version
        for t in reversed(compilable_toolkits(archs))
        if driver is None or check_driver(driver, t.version).ok
    )
    names = _or_join([c.sm for c in caps], "and")
    together = " together" if len(caps) > 1 else ""
    why = "; ".join(f"{name}: {text}" for name, text in rejected)
    reason = f"no official PyTorch {full} build covers {names}{together} ({why})"
    if able:
        reason += f"; build from source with CUDA {_or_join(list(able), 'or')}"
    else:
        reason += f"; no CUDA toolkit compiles them together ({uncompilable_reason(archs)})"
    return VariantChoice(full, None, (), reason, tuple(rejected), able)
