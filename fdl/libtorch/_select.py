"""Which official libtorch build to install for this machine's GPUs (a pure decision).

:func:`select_variant` turns what the user asked (``--cpu``, ``--cuda 12.8``, nothing) and the
detected GPUs into a :class:`Selection`: the variant, why, how each GPU runs it, and, when no
official build covers every GPU, the source build that would (``fdl libtorch build --archs``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ParamSpec

from fdl.compat import (
    ArchList,
    Capability,
    Match,
    Target,
    Variant,
    Verdict,
    buildable_toolkits,
    check_driver,
    check_gpu_driver,
    choose_variant,
    covers,
    default_torch_version,
    newer_release_covering,
    older_release_covering,
    preferred_toolkit,
    release,
    releases_that_build,
    resolve_torch_version,
    toolkit,
    version_key,
)
from fdl.errors import UsageError

P = ParamSpec("P")

__all__ = [
    "CudaTarget",
    "Selection",
    "build_archs",
    "build_command",
    "coverage_fix",
    "cuda_target",
    "cuda_variant_name",
    "installed_coverage",
    "select_rocm",
    "select_variant",
]


@dataclass(frozen=True)
class Selection:
    """The official build chosen for this machine.

    Attributes:
        torch_version: Full PyTorch version (``2.14.1``).
        variant: ``cpu``, ``cu130``, ...
        cuda: Its CUDA version, None for CPU.
        how: ``requested`` (--cpu/--cuda), ``manifest`` (libtorch.variant) or ``detected``.
        reason: One line saying why.
        gpus: Capabilities of the detected GPUs (index order, unknown ones left out).
        verdicts: How each GPU runs this build (empty for the CPU build).
        warnings: What the user should know (GPUs left out, driver too old, ...).
        build: When the build misses a GPU: the ``fdl libtorch build`` command that covers all.
        build_cuda: The CUDA that source build uses (what its plan will pick: the same
            :func:`fdl.compat.preferred_toolkit` answer).
        driver_problem: The driver is older than a GPU's own floor (R570 for Blackwell):
            what it needs and the fix; the selection is made for that floor.
    """

    torch_version: str
    variant: str
    cuda: str | None
    how: str
    reason: str
    gpus: tuple[Capability, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    warnings: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=())
    build_cuda: str | None = None
    driver_problem: str | None = None
    rocm: str | None = None

    @property
    def covers_all(self) -> bool:
        """True when every detected GPU can run this build (always true without GPUs)."""
        if self.cuda is None:
            return not self.gpus
        return all(v.ok for v in self.verdicts)

    @property
    def uncovered(self) -> tuple[Capability, ...]:
        if self.cuda is None:
            return self.gpus
        return tuple(v.gpu for v in self.verdicts if not v.ok)

    @property
    def build_version(self) -> str:
        """What the archive's ``build-version`` file should say (``2.14.1+cu130``)."""
        return f"{self.torch_version}+{self.variant}"

    def to_json(self) -> dict[str, Any]:
        return {
            "torch": self.torch_version,
            "variant": self.variant,
            "cuda": self.cuda,
            "how": self.how,
            "reason": self.reason,
            "gpus": [str(c) for c in self.gpus],
            "covers_all_gpus": self.covers_all,
            "uncovered": [c.sm for c in self.uncovered],
            "verdicts": [
                {"gpu": v.gpu.sm, "match": v.match.value, "reason": v.reason} for v in self.verdicts
            ],
            "warnings": list(self.warnings),
            "build_command": " ".join(self.build) if self.build else None,
            "build_cuda": self.build_cuda,
            "driver_problem": self.driver_problem,
            "rocm": self.rocm,
            "vendor": "amd" if self.rocm else "nvidia" if self.cuda else "cpu",
        }


def cuda_variant_name(cuda: str) -> str:
    """``12.8`` / ``cu128`` -> ``cu128`` (the toolkit must be known).

    Raises:
        UsageError: not a known CUDA version.
    """
    return toolkit(cuda).variant


def build_archs(gpus: Sequence[Capability]) -> str:
    """The ``--archs`` value for a source build covering ``gpus``: ``6.1,12.0``."""
    return ",".join(str(c) for c in sorted(set(gpus)))


def build_command(gpus: Sequence[Capability], torch_version: str | None = None) -> tuple[str, ...]:
    """The command that builds a libtorch for exactly these GPUs.

    The build planner (``fdl libtorch build``) owns the details; this only names the call.
    """
    argv = ["fdl", "libtorch", "build", "--archs", build_archs(gpus)]
    if torch_version:
        argv += ["--torch", torch_version]
    return tuple(argv)


def _with_provenance(choose: Callable[P, Selection]) -> Callable[P, Selection]:
    """A release read from its own artefacts (not the reviewed tables) says so in the
    selection's warnings, whichever way it was chosen."""

    def chosen(*args: P.args, **kwargs: P.kwargs) -> Selection:
        selection = choose(*args, **kwargs)
        provenance = release(selection.torch_version).provenance
        if not provenance:
            return selection
        return replace(selection, warnings=(*selection.warnings, provenance))

    chosen.__doc__ = choose.__doc__
    return chosen


@_with_provenance
def select_variant(
    gpus: Sequence[Capability],
    *,
    cpu: bool = False,
    cuda: str | None = None,
    torch: str | None = None,
    preferred: str | None = None,
    driver: str | None = None,
    preferred_origin: str | None = None,
    platform: str = "linux-x86_64",
) -> Selection:
    """Choose the official build: the one asked for, else the one that fits the GPUs.

    Args:
        gpus: Capabilities of the detected GPUs.
        cpu: ``--cpu``.
        cuda: ``--cuda 12.8`` (or ``cu128``).
        torch: ``--torch 2.13`` / ``2.13.0``; the newest known when None.
        preferred: The manifest's ``libtorch.variant`` (``cpu``, ``cu130``, ``auto``).
        driver: The NVIDIA driver version, to warn about builds it cannot run.
        preferred_origin: Where ``preferred`` was written (``fdl.yml:20:12``).
        platform: This machine's (``linux-arm64``): only its builds are chosen, never an
            x86_64 one.

    Raises:
        UsageError: ``--cpu`` with ``--cuda``, an unknown CUDA version or torch version,
            or a variant the release does not publish.
    """
    if cpu and cuda:
        raise UsageError(
            "--cpu and --cuda are mutually exclusive", hint="pass one of them, or neither"
        )
    full = resolve_torch_version(torch)
    caps = tuple(sorted(set(gpus)))
    floor = check_gpu_driver(driver, caps) if driver else None
    if floor is not None and not floor.ok:
        # A driver older than a GPU's own floor (R570 for Blackwell) runs no libtorch on
        # it, whatever its CUDA: plan for the oldest driver that does, and say that the
        # driver, not the release or the toolkit, is what stands in the way.
        chosen = select_variant(
            caps,
            cpu=cpu,
            cuda=cuda,
            torch=torch,
            preferred=preferred,
            driver=floor.required,
            preferred_origin=preferred_origin,
            platform=platform,
        )
        return _behind_driver(chosen, driver or "", floor.required)
    if cpu or cuda:
        name = "cpu" if cpu else cuda_variant_name(str(cuda))
        why = f"{_flag(cpu, cuda)} was given"
        return _fixed(full, name, caps, driver, "requested", why, platform)
    if preferred and preferred != "auto":
        name = preferred if preferred == "cpu" or preferred.startswith("cu") else "?"
        if name == "?":
            name = cuda_variant_name(preferred)
        where = f" ({preferred_origin})" if preferred_origin else " in the manifest"
        why = f"the project asks for {name}: libtorch.variant{where}"
        return _fixed(full, name, caps, driver, "manifest", why, platform)
    if (
        torch is None
        and caps
        and not choose_variant(caps, full, driver=driver, platform=platform).ok
    ):
        # No torch asked for, and the newest release has no build for these GPUs (2.15
        # dropped Pascal): the newest release that has one, rather than hours of building.
        older = older_release_covering(caps, full, driver, platform)
        if older is not None:
            selection = _detected(older[0], caps, driver, platform)
            # the release has a build for the GPUs, but not one this driver runs
            runs = (
                f" that driver {driver} runs"
                if choose_variant(caps, full, platform=platform).ok
                else ""
            )
            reason = (
                f"torch {full} has no official build for {', '.join(c.sm for c in caps)}"
                f"{runs}: torch {older[0]} is the newest release with one; {selection.reason}"
            )
            return replace(selection, reason=reason)
    return _detected(full, caps, driver, platform)


def _behind_driver(selection: Selection, driver: str, floor: str) -> Selection:
    """``selection`` (made for driver ``floor``) on a machine whose ``driver`` is older than
    a GPU's floor: the driver first, in the reason and the warnings."""
    if selection.cuda is None and not selection.build:
        return selection  # the CPU build: no GPU code, whatever the driver
    cuda = selection.build_cuda if selection.cuda is None else selection.cuda
    check = check_driver(driver, cuda or "", gpus=selection.gpus)
    first = f"{check.reason}: {check.fix}"
    warnings = tuple(w for w in selection.warnings if "driver" not in w)
    reason = f"{check.reason}; for driver {floor} or newer: {selection.reason}"
    return replace(selection, reason=reason, warnings=(first, *warnings), driver_problem=first)


def select_rocm(torch: str | None, rocm: str, *, glibc: str | None = None) -> Selection:
    """The official ROCm build ``rocm`` (``7.0``) of ``torch`` (the newest release with
    ROCm builds when None), for ``fdl libtorch download --rocm``.

    Args:
        glibc: This machine's glibc (``2.36``), to warn when the build needs a newer one.

    Raises:
        UsageError: a malformed version, or a release without that ROCm build.
    """
    from fdl.compat.rocm import rocm_build, rocm_builds

    if torch is None:
        newest = max((b.torch for b in rocm_builds()), key=version_key, default=None)
        full = newest or resolve_torch_version(None)
    else:
        full = resolve_torch_version(torch)
    build = rocm_build(full, rocm)
    warnings: list[str] = []
    if glibc and build.glibc and version_key(glibc) < version_key(build.glibc):
        warnings.append(
            f"this machine's glibc {glibc} is older than the {build.glibc} that torch "
            f"{build.torch}+{build.name}'s libraries need: they will not load here"
        )
    reason = f"requested (--rocm {build.rocm}): AMD GPUs {' '.join(build.gfx)}"
    return Selection(
        build.torch,
        build.name,
        None,
        "requested",
        reason,
        warnings=tuple(warnings),
        rocm=build.rocm,
    )


def _flag(cpu: bool, cuda: str | None) -> str:
    return "--cpu" if cpu else f"--cuda {cuda}"


def _fixed(
    full: str,
    name: str,
    caps: tuple[Capability, ...],
    driver: str | None,
    how: str,
    why: str,
    platform: str,
) -> Selection:
    variant = release(full).variant(name, platform)
    verdicts = tuple(covers(variant.targets_for(full), caps)) if not variant.is_cpu else ()
    selection = Selection(full, variant.name, variant.cuda, how, why, caps, verdicts)
    return _annotate(selection, variant, driver, platform)


def _detected(
    full: str, caps: tuple[Capability, ...], driver: str | None, platform: str
) -> Selection:
    choice = choose_variant(caps, full, driver=driver, platform=platform)
    if choice.variant is not None:
        variant = choice.variant
        selection = Selection(
            full, variant.name, variant.cuda, "detected", choice.reason, caps, choice.verdicts
        )
        return _annotate(selection, variant, driver, platform)
    partial = _best_partial(full, caps, driver, platform)
    if partial is None:
        cpu = release(full).variant("cpu", platform)
        selection = Selection(full, "cpu", None, "detected", choice.reason, caps)
        return _annotate(selection, cpu, driver, platform)
    variant, verdicts = partial
    covered = ", ".join(v.gpu.sm for v in verdicts if v.ok)
    reason = f"{choice.reason}. {variant.name} runs on {covered} only"
    selection = Selection(full, variant.name, variant.cuda, "detected", reason, caps, verdicts)
    return _annotate(selection, variant, driver, platform)


def _best_partial(
    full: str, caps: tuple[Capability, ...], driver: str | None, platform: str
) -> tuple[Variant, tuple[Verdict, ...]] | None:
    """The CUDA build that runs on the most GPUs (ties: PyPI's default, then the newest GPU)."""
    ranked: list[tuple[tuple[int, ...], Variant, tuple[Verdict, ...]]] = []
    for variant in release(full).variants_on(platform):
        if variant.is_cpu or variant.cuda is None:
            continue
        if driver is not None and not check_driver(driver, variant.cuda).ok:
            continue
        verdicts = tuple(covers(variant.targets_for(full), caps))
        served = [v.gpu for v in verdicts if v.ok]
        if not served:
            continue
        newest = max(served).number
        newer_cuda_first = tuple(-p for p in version_key(variant.cuda))
        rank = (-len(served), 0 if variant.default else 1, -newest, *newer_cuda_first)
        ranked.append((rank, variant, verdicts))
    if not ranked:
        return None
    ranked.sort(key=lambda item: item[0])
    return ranked[0][1], ranked[0][2]


def _annotate(
    selection: Selection, variant: Variant, driver: str | None, platform: str
) -> Selection:
    """Add the warnings and the build suggestion a selection needs."""
    warnings: list[str] = []
    caps = selection.gpus
    if variant.is_cpu and caps:
        names = ", ".join(c.sm for c in caps)
        warnings.append(f"the CPU build does not use the GPUs ({names})")
    missed = [v.gpu.sm for v in selection.verdicts if not v.ok]
    if missed:
        warnings.append(f"{variant.name} has no code for {', '.join(missed)}")
    if driver is not None and variant.cuda is not None:
        ptx = any(v.match is Match.PTX for v in selection.verdicts)
        check = check_driver(driver, variant.cuda, gpus=caps, ptx=ptx)
        if not check.ok:
            warnings.append(f"{check.reason}: update the NVIDIA driver")
    build: tuple[str, ...] = ()
    build_cuda: str | None = None
    if caps and not selection.covers_all and not platform.startswith("macos"):
        full = selection.torch_version
        pinned = full != default_torch_version()
        archs = ArchList.of(Target(c) for c in caps)
        newer = newer_release_covering(caps, full, driver, platform)
        if buildable_toolkits(full, archs):
            build = build_command(caps, full if pinned else None)
            choice = preferred_toolkit(full, archs, driver)
            build_cuda = choice.version
            warnings.append(
                f"for every GPU, build libtorch from source: {' '.join(build)} (torch {full}, "
                f"CUDA {choice.version})"
            )
        elif newer is not None:
            version, name = newer
            warnings.append(
                f"torch {full} cannot be built for {', '.join(c.sm for c in caps)}: use torch "
                f"{version} or newer, whose {name} build covers them ({_get_command(platform)} "
                f"--torch {version})"
            )
        elif others := releases_that_build(archs):
            build = build_command(caps, others[0])
            warnings.append(
                f"torch {full} cannot be built for every GPU; torch {others[0]} can: "
                f"{' '.join(build)}"
            )
        if build:  # a download that needs no build, from another release
            gpus = ", ".join(c.sm for c in caps)
            for other in (newer, older_release_covering(caps, full, driver, platform)):
                if other is not None:
                    warnings.append(
                        f"or, without a build: torch {other[0]}'s official {other[1]} build "
                        f"runs on {gpus} ({_get_command(platform)} --torch {other[0]})"
                    )
    return Selection(
        selection.torch_version,
        selection.variant,
        selection.cuda,
        selection.how,
        selection.reason,
        caps,
        selection.verdicts,
        tuple(warnings),
        build,
        build_cuda,
    )


def _get_command(platform: str) -> str:
    """How an official build is installed on ``platform``: the libtorch zip, or (Linux arm64,
    which has no zips) the platform's torch wheel."""
    from fdl.compat import libtorch_platforms

    if platform in libtorch_platforms():
        return "fdl libtorch download"
    return "fdl libtorch install --from-wheel"


def coverage_fix(
    gpus: Sequence[Capability], torch: str | None = None, driver: str | None = None
) -> str:
    """The command that gets a variant running on all ``gpus``: a download when an official
    build covers them, else a source build."""
    try:
        selection = select_variant(gpus, torch=torch, driver=driver)
    except UsageError:  # a torch version the tables do not know
        selection = select_variant(gpus, driver=driver)
    if selection.covers_all:
        flag = f"--cuda {selection.cuda}" if selection.cuda else "--cpu"
        pinned = torch and selection.torch_version != default_torch_version()
        return f"fdl libtorch download {flag}" + (
            f" --torch {selection.torch_version}" if pinned else ""
        )
    return " ".join(selection.build)


def installed_coverage(
    name: str,
    cuda: str | None,
    archs: dict[str, list[str]],
    gpus: Sequence[Capability],
    *,
    torch: str | None = None,
    driver: str | None = None,
) -> tuple[str, str] | None:
    """The warning and fix when a CUDA variant just installed has no code for some of
    ``gpus`` (``archs``: what its binaries hold, ``{"cubin": [...], "ptx": [...]}``): the
    same words ``fdl libtorch download`` says before it installs, for installs whose
    build is known only once installed (a wheel). None when every GPU runs it, or for a
    CPU build (its plan says it does not use the GPUs)."""
    from fdl.compat import parse_archs, runs_on

    codes = [*archs.get("cubin", []), *archs.get("ptx", [])]
    if cuda is None or not gpus or not codes:
        return None
    targets = parse_archs(codes)
    missed = [gpu.sm for gpu in gpus if not runs_on(targets, gpu).ok]
    if not missed:
        return None
    return (
        f"{name} has no code for {', '.join(missed)}: those GPUs cannot run it",
        coverage_fix(gpus, torch, driver),
    )


@dataclass(frozen=True)
class CudaTarget:
    """The CUDA libtorch a project's CUDA commands use on a machine (``fdl init``'s
    ``cuda`` service): the same answer as ``fdl setup`` for those GPUs and driver.

    Attributes:
        variant: ``precompiled/cu126`` or ``builds/sm61-sm120``.
        cuda: Its CUDA version (the image's base).
        cudnn: Whether it uses cuDNN.
        why: One line: why this one.
        command: The fdl command that installs it.
    """

    variant: str
    cuda: str
    cudnn: bool
    why: str
    command: tuple[str, ...]


def cuda_target(
    gpus: Sequence[Capability], torch: str | None = None, driver: str | None = None
) -> CudaTarget:
    """The CUDA build for these GPUs (none: PyPI's default CUDA build of ``torch``).

    Raises:
        UsageError: no official build covers the GPUs and no source build of ``torch``
            can (the fix names the release that can).
    """
    full = resolve_torch_version(torch)
    pinned = ("--torch", full)
    if not gpus:
        default = next(v for v in release(full).variants if v.default and v.cuda)
        cuda = str(default.cuda)
        return CudaTarget(
            f"precompiled/{default.name}",
            cuda,
            default.cudnn is not None,
            f"no GPU was named or detected: PyPI's default CUDA build of torch {full} "
            f"(CUDA {cuda}, driver >= {toolkit(cuda).driver_min})",
            ("fdl", "libtorch", "download", "--cuda", cuda, *pinned),
        )
    selection = select_variant(gpus, torch=full, driver=driver)
    if selection.covers_all and selection.cuda is not None:
        return CudaTarget(
            f"precompiled/{selection.variant}",
            selection.cuda,
            release(full).variant(selection.variant).cudnn is not None,
            selection.reason,
            ("fdl", "libtorch", "download", "--cuda", selection.cuda, *pinned),
        )
    if selection.build and selection.build_cuda is not None:
        archs = ArchList.of(Target(c) for c in selection.gpus)
        command = selection.build if "--torch" in selection.build else (*selection.build, *pinned)
        return CudaTarget(
            f"builds/{archs.dir_name()}",
            selection.build_cuda,
            True,
            selection.reason,
            command,
        )
    names = " + ".join(c.sm for c in selection.gpus)
    raise UsageError(
        f"torch {full} has no CUDA build for {names} and cannot be built for them",
        hint="; ".join(w for w in selection.warnings if "use torch" in w or "can:" in w)
        or "name other --gpus, or pick another --torch",
    )
