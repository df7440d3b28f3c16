"""Official PyTorch releases: CUDA variants, the archs they contain, source-build needs.

Read from ``fdl/data/compat/pytorch.yaml``. :func:`choose_variant` answers "which official
build runs on these GPUs" with the reason, and says so when none does (sm_61 + sm_120).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from fdl.compat._data import (
    CompatDataError,
    in_range,
    load_table,
    prefix_matches,
    require,
    verified,
    version_key,
)
from fdl.compat.archs import ArchList, Capability, Target, parse_archs, parse_capability
from fdl.compat.cuda import check_driver, compilable_toolkits, uncompilable_reason
from fdl.compat.rules import Match, Verdict, covers
from fdl.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "BuildConstraints",
    "NewerRelease",
    "Observation",
    "Release",
    "SourceRequirements",
    "ToolkitChoice",
    "Variant",
    "VariantChoice",
    "build_constraints",
    "buildable_toolkits",
    "choose_variant",
    "default_torch_version",
    "learned_path",
    "learned_release",
    "newer_release_covering",
    "older_release_covering",
    "preferred_toolkit",
    "release",
    "releases",
    "releases_that_build",
    "resolve_torch_version",
    "source_requirements",
    "tables_reviewed",
    "tested_cuda",
    "variant_targets",
    "wheel_variant_problem",
]


X86 = "linux-x86_64"
# How an official build is published: LibTorch zips (archives) and torch wheels.
FORMS = ("archive", "wheel")
# Platforms whose builds are the `releases` entries (the libtorch zips' variant names).
_X86_LIKE = (X86, "windows-x86_64")


class NewerRelease(UsageError):
    """A torch release newer than the reviewed tables whose facts fdl has not read: all of
    them (``archs`` False), or the archs of its official build only (read from METADATA,
    ``archs`` True). The tables refuse; a command may read them and plan again."""

    def __init__(self, message: str, *, hint: str, version: str, archs: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.version = version
        self.archs = archs


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
        forms: How it is published: ``archive`` (the LibTorch zip of download.pytorch.org)
            and/or ``wheel`` (the torch wheel of download.pytorch.org/whl/<name>).
        patches: The patch releases that have it, when not every one of the release
            does (cu129 of 2.9: 2.9.1 only); empty: all.
        archs_unread: A release newer than the tables read from its METADATA only: its
            archs are not known until its ``libtorch_cuda.so`` is streamed.
    """

    release: str
    name: str
    cuda: str | None
    targets: ArchList
    cudnn: str | None
    default: bool
    observed: tuple[Observation, ...] = ()
    forms: tuple[str, ...] = FORMS
    patches: tuple[str, ...] = ()
    archs_unread: bool = False

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None

    def targets_for(self, version: str) -> ArchList:
        """What the binary of ``version`` contains: observed if known, else documented.

        Raises:
            NewerRelease: a release read from its METADATA only (its archs are not known).
        """
        if self.archs_unread:
            raise NewerRelease(
                f"the archs of torch {version}'s official {self.name} build are not known: "
                "its facts were read from its wheel's METADATA only",
                hint=f"read them (about 360 MB, once): python -m fdl.refresh learn {version}",
                version=version,
                archs=True,
            )
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
    others: tuple[tuple[str, tuple[Variant, ...]], ...] = ()
    # Not from the reviewed tables: where and when its facts were read (a release newer
    # than the tables, read from its own artefacts by `python -m fdl.refresh learn`).
    provenance: str = ""

    @property
    def latest(self) -> str:
        """The newest known patch release (``2.14.1``)."""
        return max(self.patches, key=version_key)

    def variants_on(self, platform: str = X86, form: str = "archive") -> tuple[Variant, ...]:
        """The official builds for ``platform`` published as ``form`` (``archive``: the
        LibTorch zips, what fdl downloads; ``wheel``: the torch wheels, which include
        wheel-only CUDA variants); ``linux-arm64``: the PyPI aarch64 wheel's build; a
        platform the tables do not list has none."""
        if platform in _X86_LIKE:
            return tuple(v for v in self.variants if form in v.forms)
        return dict(self.others).get(platform, ())

    def variant(self, name: str, platform: str = X86, form: str = "archive") -> Variant:
        """The variant called ``name`` (on ``platform``, published as ``form``).

        Raises:
            UsageError: the release has no such build, or publishes it in the other form
                only (a wheel-only CUDA variant asked for as a LibTorch archive).
        """
        found = self.variants_on(platform, form)
        for variant in found:
            if variant.name == name:
                return variant
        names = ", ".join(v.name for v in found) or "none"
        on = "" if platform in _X86_LIKE else f" for {platform}"
        other = next((v for v in self.variants if v.name == name and platform in _X86_LIKE), None)
        if other is not None:
            raise UsageError(
                f"PyTorch {_patches_text(self, other)} publishes {name} only as "
                f"{_form_text(other.forms)}, not as {_form_text((form,))}",
                hint=_form_hint(self, other, form, names),
            )
        raise UsageError(
            f"PyTorch {self.version} has no official {name} build{on}",
            hint=f"available: {names}",
        )


_FORM_TEXT = {"archive": "a LibTorch archive", "wheel": "a torch wheel"}


def _form_text(forms: Iterable[str]) -> str:
    return " or ".join(_FORM_TEXT.get(f, f) for f in forms)


def _patches_text(rel: Release, variant: Variant) -> str:
    return "/".join(variant.patches) if variant.patches else rel.version


def _form_hint(rel: Release, variant: Variant, form: str, names: str) -> str:
    if form == "archive" and "wheel" in variant.forms:
        version = variant.patches[-1] if variant.patches else rel.latest
        return (
            f"fdl libtorch install --from-wheel --torch {version} --index-url "
            f"https://download.pytorch.org/whl/{variant.name} (the archives: {names})"
        )
    return f"published as {_form_text((form,))}: {names}"


def wheel_variant_problem(version: str, variant: str) -> str | None:
    """Why ``pip download torch==<version>`` from download.pytorch.org/whl/<variant> finds
    no wheel the tables know of (None: the release has that wheel, or is not in the
    tables). Wheel-only variants count (cu129 of 2.9.1 and 2.10.0, cu128 of 2.12.0); a
    patch release the tables do not list for a variant is not refused (unknown)."""
    try:
        rel = release(version)
    except UsageError:
        return None
    full = resolve_torch_version(version)
    wheels = rel.variants_on(X86, "wheel")
    if any(v.name == variant for v in wheels):
        return None
    listed = ", ".join(v.name for v in wheels) or "none"
    return f"PyTorch {full} has no {variant} wheel (its wheels: {listed})"


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
    forms = tuple(str(f) for f in entry.get("forms") or FORMS)
    if not forms or any(f not in FORMS for f in forms):
        raise CompatDataError(f"{where}: forms must be some of {', '.join(FORMS)}")
    return Variant(
        release=release_version,
        name=str(require(entry, "name", where)),
        cuda=str(cuda) if cuda is not None else None,
        targets=parse_archs(str(entry["archs"])) if entry.get("archs") else ArchList(),
        cudnn=str(entry["cudnn"]) if entry.get("cudnn") else None,
        default=bool(entry.get("default", False)),
        observed=observed,
        forms=forms,
        patches=tuple(str(p) for p in entry.get("patches") or ()),
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
                others=_platform_variants(version),
            )
        )
    return tuple(sorted(result, key=lambda r: version_key(r.version)))


def _platform_variants(version: str) -> tuple[tuple[str, tuple[Variant, ...]], ...]:
    """(platform, builds) of ``version`` on the platforms of pytorch.yaml's ``platforms``."""
    found = []
    for platform, section in (load_table("pytorch").get("platforms") or {}).items():
        for entry in section["ranges"]:
            if in_range(version, entry.get("since"), entry.get("until")):
                variants = tuple(_variant(version, v) for v in entry["variants"])
                found.append((str(platform), variants))
                break
    return tuple(found)


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
    newest = releases()[-1]
    if key and len(key) >= 2 and key[:2] > version_key(newest.version)[:2]:
        learned = learned_release(version)
        if learned is not None:
            return learned
        # Newer than the tables and not read from its artefacts: say so, rather than guess
        # its CUDA builds and archs (a command may read them and ask again).
        raise NewerRelease(
            f"PyTorch {version} is newer than fdl's compatibility tables, which end at "
            f"{newest.latest}: fdl cannot tell which CUDA builds, archs and build rules it has",
            hint=(
                f"use --torch {newest.latest}, or read {version}'s facts from its own wheels "
                f"on PyPI: python -m fdl.refresh learn {version}"
            ),
            version=version,
        )
    raise UsageError(f"unknown PyTorch version {version!r}", hint=f"known releases: {known}")


def learned_path(version: str) -> Path:
    """Where fdl's cache keeps the facts of release ``version`` (``2.16``) read from its
    own artefacts (``<cache>/compat/torch/2.16.json``)."""
    from fdl.paths import cache_dir

    minor = ".".join(str(p) for p in version_key(version)[:2])
    return cache_dir() / "compat" / "torch" / f"{minor}.json"


def learned_release(version: str) -> Release | None:
    """The release ``version`` as ``python -m fdl.refresh learn`` read it from its wheels on
    PyPI and kept it in fdl's cache, with its provenance; None when it was not read.

    Raises:
        UsageError: the cached file is not one fdl wrote.
    """
    import json

    from fdl._files import read_small_text

    path = learned_path(version)
    try:
        text = read_small_text(path)
    except OSError as exc:  # a FIFO, a device, a directory: not a file fdl wrote
        from fdl._files import reason_of

        raise UsageError(
            f"{path}: {reason_of(exc)}, not the facts of a torch release as fdl keeps them",
            hint=f"remove it and read them again: python -m fdl.refresh learn {version}",
        ) from None
    if text is None:
        return None
    try:
        entry = json.loads(text)
        minor = str(entry["version"])
        source = entry["source"]
        learned = Release(
            version=minor,
            patches=tuple(str(p) for p in entry["patches"]),
            source=SourceRequirements(
                str(source["cmake_min"]),
                int(source["cxx_standard"]),
                str(source["python_min"]),
                False,
            ),
            variants=tuple(
                replace(_variant(minor, v), archs_unread=v.get("archs_read") is False)
                for v in entry["variants"]
            ),
            patches_verified=False,
            others=_platform_variants(minor),
            provenance=(
                f"torch {minor}'s facts were read from its artefacts ({entry['read_from']}) on "
                f"{entry['read_on']} by {entry.get('read_by', 'python -m fdl.refresh learn')}, "
                "not from fdl's reviewed tables"
            ),
        )
    except (
        ValueError,
        KeyError,
        TypeError,
        AttributeError,  # a variant that is no mapping ("variants": [1, 2])
        RecursionError,
        CompatDataError,
    ) as exc:
        raise UsageError(
            f"{path}: not the facts of a torch release as fdl keeps them ({exc})",
            hint=f"read them again: python -m fdl.refresh learn {version}",
        ) from None
    if not prefix_matches(version, minor) or sum(v.default for v in learned.variants) != 1:
        raise UsageError(
            f"{path}: holds torch {minor}, not {version}, or no single default variant",
            hint=f"read them again: python -m fdl.refresh learn {version}",
        )
    return learned


def tables_reviewed() -> str:
    """The date (``2026-11-28``) the release tables were last checked against PyPI
    (``reviewed:`` of pytorch.yaml, kept by ``python -m fdl.refresh --write``)."""
    reviewed = load_table("pytorch").get("reviewed")
    if reviewed is None:
        raise CompatDataError("pytorch.yaml: the `reviewed` date is missing")
    return str(reviewed)


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
    if platform not in _X86_LIKE and not rejected:
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


# --- what building a release from source accepts ----------------------------------------------


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
