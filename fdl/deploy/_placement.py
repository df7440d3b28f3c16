"""Placement by arch: whether the image's libtorch binaries run on a target's GPUs.

Pure: the image's variant metadata (cubins and PTX read from the fatbins at install,
the CUDA version) against the GPUs the target declares, through the compat rules
(:func:`fdl.compat.runs_on`) and the driver floor of each CUDA toolkit
(:func:`fdl.compat.check_driver`). A SLURM job can land on any GPU it asks for, so every
one must be covered; a Kubernetes pod is pinned by node affinity to the covered ones, so
one is enough.
"""

from __future__ import annotations

from dataclasses import dataclass

from fdl.compat import (
    ArchList,
    Match,
    check_driver,
    check_gpu_driver,
    parse_archs,
    parse_capability,
    runs_on,
    version_key,
)
from fdl.deploy._backend import backend
from fdl.deploy._target import DeployTarget, GpuOffer
from fdl.errors import EnvironmentProblem, FdlError

__all__ = ["GpuVerdict", "ImageArchs", "Placement", "check_placement", "place"]


@dataclass(frozen=True)
class ImageArchs:
    """What the image's libtorch can run on (from its ``variant.json``).

    Attributes:
        variant: The variant's name (``builds/sm61-sm120``).
        cuda: Its CUDA version, None for a CPU build.
        codes: nvcc code names found in its binaries (``sm_61``, ``compute_120``).
        torch: Its PyTorch release (``2.13.0``), when known: a refusal's fix names an
            official build of that release.
    """

    variant: str
    cuda: str | None
    codes: tuple[str, ...]
    torch: str | None = None

    def targets(self) -> ArchList:
        return parse_archs(list(self.codes)) if self.codes else ArchList()


@dataclass(frozen=True)
class GpuVerdict:
    """One offered GPU, judged."""

    gpu: GpuOffer
    ok: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu.name,
            "capability": self.gpu.capability,
            "driver": self.gpu.driver,
            "ok": self.ok,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Placement:
    """Where the image may run on a target.

    Attributes:
        verdicts: Each GPU the job could land on, judged.
        allowed: The GPUs whose nodes the job may use (node affinity on Kubernetes).
    """

    verdicts: tuple[GpuVerdict, ...]
    allowed: tuple[GpuOffer, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "verdicts": [v.to_json() for v in self.verdicts],
            "allowed": [g.name for g in self.allowed],
        }


def _judge(image: ImageArchs, gpu: GpuOffer) -> GpuVerdict:
    arch = runs_on(image.targets(), gpu.capability)
    if not arch.ok:
        return GpuVerdict(gpu, False, arch.reason)
    if image.cuda and gpu.driver:
        driver = check_driver(gpu.driver, image.cuda, gpus=[arch.gpu], ptx=arch.match is Match.PTX)
        if not driver.ok:
            return GpuVerdict(gpu, False, driver.reason)
    return GpuVerdict(gpu, True, arch.reason)


def place(target: DeployTarget, image: ImageArchs) -> Placement:
    """Judge every GPU the target's job could land on (no error raised)."""
    if target.gpus_per_node == 0 or image.cuda is None:
        return Placement((), ())
    verdicts = tuple(_judge(image, gpu) for gpu in target.offered())
    return Placement(verdicts, tuple(v.gpu for v in verdicts if v.ok))


def check_placement(target: DeployTarget, image: ImageArchs) -> Placement:
    """:func:`place`, refusing a deploy whose binaries cannot run where it would land.

    Raises:
        UsageError: the target asks for GPUs but declares none (placement cannot be checked).
        EnvironmentProblem: the image is a CPU build sent to GPUs, or its archs or CUDA do
            not fit the target's GPUs (exit 4, as the README says of both).
    """
    from fdl.errors import UsageError

    if target.gpus_per_node == 0:
        return Placement((), ())
    if image.cuda is None:
        raise EnvironmentProblem(
            f"deploy target {target.name!r} asks for GPUs, but the image's libtorch "
            f"({image.variant}) is a CPU build",
            hint="build the image with a CUDA variant (`variant:` in the image profile), "
            "or set gpus-per-node: 0",
        )
    if not target.offered():
        raise UsageError(
            f"deploy target {target.name!r} asks for GPUs but declares none under `gpus:`",
            hint=f"declare them at {target.origin}, e.g. gpus: "
            '[{type: h100, capability: "9.0", driver: "550.54"}]',
        )
    placement = place(target, image)
    bad = [v for v in placement.verdicts if not v.ok]
    everywhere = backend(target.kind).lands_anywhere
    if (everywhere and bad) or not placement.allowed:
        lines = "\n".join(f"  {v.gpu.name} ({v.gpu.capability}): {v.reason}" for v in bad)
        raise EnvironmentProblem(
            f"the image's libtorch ({image.variant}, CUDA {image.cuda}, "
            f"{' '.join(image.codes) or 'no GPU code'}) cannot run on "
            f"{'all' if everywhere and placement.allowed else 'any'} of the GPUs of "
            f"target {target.name!r}",
            details=lines,
            hint=_fix(target, image, bad),
        )
    return placement


def _caps(verdicts: list[GpuVerdict] | tuple[GpuOffer, ...]) -> list[str]:
    offers = [v.gpu if isinstance(v, GpuVerdict) else v for v in verdicts]
    return sorted({g.capability for g in offers}, key=lambda c: tuple(map(int, c.split("."))))


def _fix(target: DeployTarget, image: ImageArchs, bad: list[GpuVerdict]) -> str:
    """The smallest change that runs: the official build of the image's torch release
    that covers the target's GPUs on their driver, else a source build of the target's
    archs only (not the image's archs plus the target's: a build per extra arch is hours)."""
    from fdl.compat import choose_variant

    # A SLURM job may land on any offered GPU; a Kubernetes pod needs only one to fit.
    anywhere = backend(target.kind).lands_anywhere
    gpus = target.offered() if anywhere else tuple(v.gpu for v in bad)
    drivers = sorted(
        (g.driver for g in gpus if g.driver), key=lambda d: tuple(map(int, d.split(".")))
    )
    advice = []
    floors = [
        check
        for v in bad
        if "driver" in v.reason
        and v.gpu.driver
        and not (check := check_gpu_driver(v.gpu.driver, [parse_capability(v.gpu.capability)])).ok
    ]
    if floors:
        # A GPU newer than the nodes' driver: no libtorch of any CUDA runs there. The fix
        # is that GPU's floor, or the image's CUDA's when higher (one rule: check_gpu_driver).
        needs = [c.required for c in floors]
        needs += [check_driver(d, image.cuda).required for d in drivers if image.cuda]
        need = max(needs, key=version_key)
        advice.append(
            f"update the nodes' NVIDIA driver to {need} or newer ({floors[0].reason}; no "
            "libtorch of any CUDA runs there before) and its `driver:` in the target"
        )
    else:
        official = None
        if image.torch is not None:
            try:
                choice = choose_variant(
                    _caps(gpus), image.torch, driver=drivers[0] if drivers else None
                )
                official = choice.variant
            except FdlError:  # a release fdl's tables do not know: no official build to name
                official = None
        if official is not None and official.cuda is not None:
            advice.append(
                f"use torch {image.torch}'s official {official.name} build, which runs on them "
                f"(`fdl libtorch download --cuda {official.cuda} --torch {image.torch}`), as "
                "the image profile's `variant:`, and rebuild the image"
            )
        else:
            archs = ",".join(_caps(gpus))
            advice.append(
                f"build a variant for the target's GPUs (`fdl libtorch build --archs {archs}`), "
                "make it the image profile's `variant:`, and rebuild the image"
            )
        if any("driver" in v.reason for v in bad):
            advice.append("or update the nodes' driver and its `driver:` in the target")
    if anywhere and target.gpu_type is None and len(target.gpus) > 1:
        advice.append("or pin `gpu-type:` to a GPU the image covers")
    return "; ".join(advice)
