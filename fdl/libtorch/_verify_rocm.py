"""``fdl libtorch verify`` of a ROCm (AMD) variant: the gfx targets of ``libtorch_hip.so``'s
offload bundles against what was recorded at install, and against the AMD GPUs here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fdl.checks import Check, Severity
from fdl.libtorch import variants
from fdl.system import GpuReport

__all__ = ["rocm_checks"]


def rocm_checks(
    path: Path, info: variants.VariantInfo, amd: Sequence[str] | None, nvidia: GpuReport | None
) -> list[Check]:
    """The ``archs`` and ``gpus`` checks of a ROCm variant."""
    from fdl.binaries import BinaryFormatError, read_offload_code
    from fdl.compat.rocm import gfx_processor

    library = path / "lib" / "libtorch_hip.so"
    if not library.is_file():
        return [
            Check(
                "archs",
                "gpu code",
                Severity.ERROR,
                f"{info.name} is an AMD (ROCm) variant but has no lib/libtorch_hip.so",
                "reinstall it: fdl libtorch download --rocm 7.0 --force",
            )
        ]
    try:
        found = read_offload_code(library).archs
    except (BinaryFormatError, OSError) as exc:
        message = getattr(exc, "message", str(exc))
        return [Check("archs", "unreadable", Severity.ERROR, message, "reinstall the variant")]
    checks = [
        Check(
            "archs",
            "gpu code",
            Severity.OK if found else Severity.ERROR,
            f"libtorch_hip.so: {' '.join(found)}" if found else "libtorch_hip.so holds no GPU code",
            None if found else "reinstall the variant",
            {"gfx": list(found)},
        )
    ]
    recorded = info.archs_found.get("gfx")
    if recorded is not None and set(recorded) != set(found):
        checks.append(
            Check(
                "archs",
                "recorded",
                Severity.ERROR,
                f"variant.json records {' '.join(recorded) or 'no GPU code'}, libtorch_hip.so "
                f"holds {' '.join(found) or 'none'}",
                "the libraries changed since install: reinstall the variant",
            )
        )
    if amd is None:
        return checks
    if not amd:
        checks.append(
            Check("gpus", "gpus", Severity.INFO, "no usable AMD GPU here: coverage not checked")
        )
    for index, arch in enumerate(amd):
        covered = gfx_processor(arch) in found
        checks.append(
            Check(
                "gpus",
                f"AMD GPU {index}",
                Severity.OK if covered else Severity.ERROR,
                f"AMD GPU {index} ({arch}): "
                + ("kernels in libtorch_hip.so" if covered else f"not covered by {info.name}"),
                None if covered else _uncovered_fix(arch),
                {"gfx": arch},
            )
        )
    if nvidia is not None and nvidia.gpus:
        checks.append(
            Check(
                "gpus",
                "NVIDIA GPUs",
                Severity.WARNING,
                f"{info.name} is a ROCm build: the NVIDIA GPU(s) here are not used by it",
                "fdl setup plans the CUDA variant for them",
            )
        )
    return checks


def _uncovered_fix(arch: str) -> str:
    from fdl.compat.rocm import rocm_builds

    official = [b for b in rocm_builds() if b.covers(arch)]
    if official:
        build = next((b for b in reversed(official) if b.default), official[-1])
        return f"fdl libtorch download --rocm {build.rocm} --torch {build.torch}"
    return (
        f"no official ROCm build has kernels for {arch}: a source build for it, planned and "
        f"checked against this machine's ROCm: fdl libtorch build --rocm-archs {arch} --dry-run"
    )
