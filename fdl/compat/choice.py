"""Which official PyTorch build runs on these GPUs (:func:`choose_variant`), with the
reason, and what to do when none does (sm_61 + sm_120: a newer or older release, or a
source build with the toolkit :func:`~fdl.compat.source_build.preferred_toolkit` names)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fdl.compat._data import version_key
from fdl.compat.archs import ArchList, Capability, Target, parse_capability
from fdl.compat.cuda import check_driver, compilable_toolkits, uncompilable_reason
from fdl.compat.pytorch import (
    X86,
    X86_LIKE,
    Variant,
    release,
    releases,
    resolve_torch_version,
)
from fdl.compat.rules import Match, Verdict, covers
from fdl.compat.source_build import buildable_toolkits, preferred_toolkit, releases_that_build

__all__ = [
    "VariantChoice",
    "choose_variant",
    "newer_release_covering",
    "older_release_covering",
]


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


def _quality(verdicts: list[Verdict]) -> int:
    return max(v.match.rank for v in verdicts)


def choose_variant(
    gpus: Iterable[Capability | str],
    torch_version: str | None = None,
    *,
    driver: str | None = None,
    platform: str = X86,
) -> VariantChoice:
    """The official build that runs on every GPU, or why none does.

    Preference among builds that cover every GPU: native cubins over compatible cubins over
    PTX JIT, then PyPI's default build, then the newest CUDA. Builds the driver is too old
    for are rejected. No GPU: the CPU build.

    Args:
        gpus: Capabilities of the GPUs (``"6.1"``, ``Capability(12, 0)``).
        torch_version: ``2.14`` / ``2.14.1``; the newest known when None.
        driver: The NVIDIA driver version, to reject builds that need a newer one.
        platform: ``linux-x86_64`` (default), ``linux-arm64``, ``macos-arm64``: only that
            platform's builds are considered.
    """
    full = resolve_torch_version(torch_version)
    rel = release(full)
    caps = sorted({parse_capability(g) if isinstance(g, str) else g for g in gpus})
    if not caps:
        cpu = next(v for v in rel.variants_on(platform) if v.is_cpu)
        return VariantChoice(full, cpu, (), "no NVIDIA GPU: the CPU build")
    fitting, rejected = _ranked(full, caps, driver, platform)
    if fitting:
        _, chosen, verdicts = fitting[0]
        chosen_rejects = [(v.name, "covers the GPUs, but ranked lower") for _, v, _ in fitting[1:]]
        return VariantChoice(
            full, chosen, tuple(verdicts), _why(chosen, verdicts), tuple(rejected + chosen_rejects)
        )
    if platform not in X86_LIKE and not rejected:
        return VariantChoice(
            full, None, (), f"PyTorch {full} has no official CUDA build for {platform}"
        )
    return _none_fits(full, caps, rejected, driver, platform)


def _ranked(
    full: str, caps: list[Capability], driver: str | None, platform: str
) -> tuple[list[tuple[_Rank, Variant, list[Verdict]]], list[tuple[str, str]]]:
    """The CUDA builds of ``full`` on ``platform`` that run on every GPU, best first, and
    (name, why) for the others."""
    fitting: list[tuple[_Rank, Variant, list[Verdict]]] = []
    rejected: list[tuple[str, str]] = []
    for variant in release(full).variants_on(platform):
        if variant.is_cpu:
            continue
        assessed = _assess(variant, full, caps, driver)
        if isinstance(assessed, str):
            rejected.append((variant.name, assessed))
        else:
            fitting.append((assessed[0], variant, assessed[1]))
    fitting.sort(key=lambda item: item[0])
    return fitting, rejected


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
    ptx = any(v.match is Match.PTX for v in verdicts)
    if driver is not None and not (check := check_driver(driver, variant.cuda, ptx=ptx)).ok:
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
    full: str,
    caps: list[Capability],
    rejected: list[tuple[str, str]],
    driver: str | None,
    platform: str,
) -> VariantChoice:
    archs = ArchList.of(Target(c) for c in caps)
    able = tuple(
        t.version
        for t in reversed(buildable_toolkits(full, archs))
        if driver is None or check_driver(driver, t.version).ok
    )
    names = _or_join([c.sm for c in caps], "and")
    together = " together" if len(caps) > 1 else ""
    why = "; ".join(f"{name}: {text}" for name, text in rejected)
    reason = f"no official PyTorch {full} build covers {names}{together} ({why})"
    newer = newer_release_covering(caps, full, driver, platform)
    if able:
        choice = preferred_toolkit(full, archs, driver)
        reason += f"; build from source with CUDA {choice.version} ({choice.why})"
    elif newer is not None:
        version, variant = newer
        reason += (
            f"; torch {full} cannot be built for them either: use torch {version} or newer "
            f"({variant} covers {names})"
        )
    elif compilable_toolkits(archs):
        others = releases_that_build(archs)
        instead = f": build torch {others[0]} from source" if others else ""
        reason += f"; torch {full} cannot be built for them{instead}"
    else:
        reason += f"; no CUDA toolkit compiles them together ({uncompilable_reason(archs)})"
    return VariantChoice(full, None, (), reason, tuple(rejected), able)


def newer_release_covering(
    gpus: Iterable[Capability], version: str, driver: str | None = None, platform: str = X86
) -> tuple[str, str] | None:
    """The oldest release newer than ``version`` with an official build for every GPU:
    (its newest patch, the build), or None."""
    caps = list(gpus)
    for candidate in releases():
        if version_key(candidate.latest) <= version_key(version):
            continue
        fitting, _ = _ranked(candidate.latest, caps, driver, platform)
        if fitting:
            return candidate.latest, fitting[0][1].name
    return None


def older_release_covering(
    gpus: Iterable[Capability], version: str, driver: str | None = None, platform: str = X86
) -> tuple[str, str] | None:
    """The newest release older than ``version`` with an official build for every GPU:
    (its newest patch, the build), or None. For GPUs a release dropped (Pascal in 2.15)."""
    caps = list(gpus)
    for candidate in reversed(releases()):
        if version_key(candidate.latest) >= version_key(version):
            continue
        fitting, _ = _ranked(candidate.latest, caps, driver, platform)
        if fitting:
            return candidate.latest, fitting[0][1].name
    return None
