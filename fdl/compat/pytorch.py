"""Official PyTorch releases: their CUDA variants and the archs they contain.

Read from ``fdl/data/compat/pytorch.yaml``. Which official build runs on some GPUs is
:mod:`fdl.compat.choice`; what building a release from source accepts,
:mod:`fdl.compat.source_build`.
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
from fdl.compat.archs import ArchList, parse_archs
from fdl.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "NewerRelease",
    "Observation",
    "Release",
    "SourceRequirements",
    "Variant",
    "default_torch_version",
    "learned_path",
    "learned_release",
    "release",
    "releases",
    "resolve_torch_version",
    "source_requirements",
    "tables_reviewed",
    "variant_targets",
    "wheel_variant_problem",
]


X86 = "linux-x86_64"
# How an official build is published: LibTorch zips (archives) and torch wheels.
FORMS = ("archive", "wheel")
# Platforms whose builds are the `releases` entries (the libtorch zips' variant names).
X86_LIKE = (X86, "windows-x86_64")


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
        if platform in X86_LIKE:
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
        on = "" if platform in X86_LIKE else f" for {platform}"
        other = next((v for v in self.variants if v.name == name and platform in X86_LIKE), None)
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
