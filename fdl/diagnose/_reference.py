"""``fdl diagnose --json``: fdl's keys and floDl's, computed from what fdl found.

The keys floDl 0.8.0 added (flodl-cli-0.8.0/src/diagnose.rs:195-273; flodl-hw-0.8.0 for the
notes): ``system.docker`` (``"container"`` inside one, else the docker client's version),
``gpus[].vendor`` and ``gpus[].arch`` (``sm`` stays for older readers and is ``""`` on
a card that is not NVIDIA), ``gpu_notes[{vendor, kind, message}]`` (what the sweep learned
that the device list cannot say; ``[]`` on a healthy machine), ``libtorch.vendor``
(``cpu``/``nvidia``/``amd``) and ``libtorch: null`` without an active variant.

NVIDIA GPUs are those fdl's checks list (NVML, ``nvidia-smi``), with floDl's NVIDIA notes:
``tool_failed`` (the tool ran and failed) and ``hardware_unusable`` (a driver is loaded but
nothing can list the cards). AMD GPUs and their notes come from the KFD topology behind
floDl's gates (:func:`fdl.system.survey.read_kfd`); they are not in ``cuda.devices``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.checks import Severity, count
from fdl.libtorch import variants
from fdl.system import Gpu, GpuReport

__all__ = [
    "NVIDIA_DRIVER_MARKER",
    "amd_gpus",
    "amd_json",
    "diagnosis_json",
    "docker_fact",
    "gpu_json",
    "gpu_notes",
]

# What flodl-hw's NVIDIA gate reads before it runs nvidia-smi (a loaded kernel driver).
NVIDIA_DRIVER_MARKER = Path("/proc/driver/nvidia/version")
# floDl reads /.dockerenv (util/system.rs:204); podman's marker and fdl's FDL_IN_CONTAINER
# override are honoured as fdl's command runner honours them (fdl/tasks/_docker.py).
_CONTAINER_MARKERS = ("/.dockerenv", "/run/.containerenv")


def docker_fact(environ: Mapping[str, str], client_version: str | None) -> str | None:
    """floDl's ``system.docker``: ``container`` inside one, else the client's version, else
    nothing (the key is left out, as floDl leaves it out without docker)."""
    forced = environ.get("FDL_IN_CONTAINER", "").strip().lower()
    inside = (
        forced in ("1", "true", "yes")
        if forced in ("1", "true", "yes", "0", "false", "no")
        else any(Path(marker).exists() for marker in _CONTAINER_MARKERS)
    )
    return "container" if inside else client_version


def amd_gpus(environ: Mapping[str, str]) -> tuple[list[Any], list[Any]]:
    """The usable AMD GPUs here and the notes on unusable ones (as ``fdl probe`` finds them:
    KFD, named by ``amd-smi``/``rocm-smi`` where present)."""
    from fdl.runner import default_runner
    from fdl.system.survey import read_kfd, rocm_runtime, with_smi

    devices, notes = read_kfd(Path("/sys"), Path("/dev/kfd"), rocm_runtime(environ))
    devices, smi_notes, _ = with_smi(devices, default_runner())
    return devices, notes + smi_notes


def amd_json(device: Any, covered: set[str]) -> dict[str, Any]:
    """An AMD GPU (:class:`fdl.system.survey.Device`) in floDl's shape (``sm`` is ``""``);
    ``covered``: the gfx targets of the active variant."""
    return {
        "index": device.index,
        "name": device.name,
        "vendor": "amd",
        "arch": device.arch,
        "sm": "",
        "capability": None,
        "memory_mib": device.vram_mb or None,
        "vram_bytes": device.vram_mb * 1024 * 1024 if device.vram_mb else None,
        "arch_compatible": device.arch in covered,
    }


def gpu_json(gpu: Gpu) -> dict[str, Any]:
    """``vendor`` and ``arch`` of one listed GPU (``sm_61``; empty when not reported)."""
    return {"vendor": "nvidia", "arch": gpu.sm or ""}


def gpu_notes(report: GpuReport, *, driver_loaded: bool) -> list[dict[str, str]]:
    """What kept GPUs off the list, as floDl's notes (none when the list is complete).

    Args:
        report: What fdl's GPU listing found.
        driver_loaded: Whether an NVIDIA kernel driver is loaded (``NVIDIA_DRIVER_MARKER``).
    """
    reason = report.reason
    if not reason or report.gpus:
        return []
    if "not found" in reason:  # no nvidia-smi: a note only where a driver is loaded
        if not driver_loaded:
            return []
        message = (
            "an NVIDIA driver is loaded but nvidia-smi is not on PATH, so the GPUs cannot be "
            "listed; install the NVIDIA utilities package (in Docker: a CUDA base image or "
            "the NVIDIA container toolkit)"
        )
        return [{"vendor": "nvidia", "kind": "hardware_unusable", "message": message}]
    return [{"vendor": "nvidia", "kind": "tool_failed", "message": reason}]


def diagnosis_json(diagnosis: Any) -> dict[str, Any]:  # a Diagnosis (checks imports this)
    """fdl's own keys (``gpus``, ``driver``, ``checks``...) and those floDl's CLI emits
    and its users script against: ``.cuda.devices`` (floDl's documented CI gate,
    docs/cli.md), ``system``, ``gpus[].vram_bytes``/``arch_compatible`` and
    ``libtorch.path``/``version``/``cuda``/``archs``/``source``, and 0.8.0's
    ``system.docker``, ``gpus[].vendor``/``arch``, ``gpu_notes`` and ``libtorch.vendor``
    (the helpers above). ``libtorch`` is null without an active variant, as
    floDl's; the installed list is always under ``variants``."""
    covered = {
        c.name
        for c in diagnosis.checks
        if c.group == "libtorch" and c.name.startswith("GPU ") and c.severity is Severity.OK
    }
    gpus = [
        {
            "index": g.index,
            "name": g.name,
            **gpu_json(g),
            "sm": g.sm,
            "capability": str(g.capability) if g.capability else None,
            "memory_mib": g.memory_mib,
            "vram_bytes": g.memory_mib * 1024 * 1024 if g.memory_mib else None,
            "arch_compatible": f"GPU {g.index}" in covered,
        }
        for g in diagnosis.gpus.gpus
    ]
    variant = diagnosis.variant
    gfx = set((variant.archs_found.get("gfx") or variant.archs_requested) if variant else ())
    system = dict(diagnosis.system)
    if diagnosis.docker is not None:
        system["docker"] = diagnosis.docker
    libtorch: dict[str, Any] | None = None
    if diagnosis.active is not None:
        info = diagnosis.variant or variants.VariantInfo(name=diagnosis.active)
        libtorch = {
            "active": diagnosis.active,
            "installed": list(diagnosis.installed),
            "path": diagnosis.active,
            **_variant_json(diagnosis.variant),
            "vendor": info.vendor,
        }
    return {
        "context": {
            "mode": "project" if diagnosis.context.project else "global",
            "root": str(diagnosis.context.root),
        },
        "system": system,
        "cuda": {"driver": diagnosis.gpus.driver, "devices": gpus},
        "gpus": [*gpus, *(amd_json(d, gfx) for d in diagnosis.amd)],
        "gpu_notes": [
            *gpu_notes(diagnosis.gpus, driver_loaded=diagnosis.nvidia_driver_loaded),
            *(note.to_json() for note in diagnosis.amd_notes),
        ],
        "driver": diagnosis.gpus.driver,
        "libtorch": libtorch,
        "variants": {"active": diagnosis.active, "installed": list(diagnosis.installed)},
        "checks": [c.to_json() for c in diagnosis.checks],
        "summary": count(diagnosis.checks),
    }


def _variant_json(info: variants.VariantInfo | None) -> dict[str, Any]:
    """The active variant as floDl's ``fdl diagnose --json`` names it (no keys: none)."""
    if info is None:
        return {}
    archs = [_dotted(a) for a in info.archs_found.get("cubin") or info.archs_requested]
    return {
        "path": info.name,
        "version": info.torch,
        "cuda": info.cuda,
        "archs": " ".join(archs),
        "source": str(info.source.get("kind") or "unknown"),
    }


_SM = re.compile(r"sm_(\d+)(\w*)")


def _dotted(arch: str) -> str:
    """``sm_120`` -> ``12.0`` (floDl's spelling); other spellings are kept."""
    found = _SM.fullmatch(arch)
    if found is None:
        return arch
    number = int(found.group(1))
    return f"{number // 10}.{number % 10}{found.group(2)}"
