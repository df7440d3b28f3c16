"""The keys floDl 0.8.0's ``fdl diagnose --json`` added, computed from what fdl found.

Source: flodl-cli-0.8.0/src/diagnose.rs:195-273 (and flodl-hw-0.8.0 for the notes):
``system.docker`` (``"container"`` inside one, else the docker client's version),
``gpus[].vendor`` and ``gpus[].arch`` (``sm`` stays for older readers and is ``""`` on
a card that is not NVIDIA), ``gpu_notes[{vendor, kind, message}]`` (what the sweep learned
that the device list cannot say; ``[]`` on a healthy machine), ``libtorch.vendor``
(``cpu``/``nvidia``/``amd``) and ``libtorch: null`` without an active variant.

fdl lists NVIDIA GPUs only (``nvidia-smi``/NVML), so every device is ``nvidia`` and the notes
are NVIDIA's: ``tool_failed`` (the tool ran and failed) and ``hardware_unusable`` (a driver
is loaded but nothing can list the cards).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.system import Gpu, GpuReport

__all__ = [
    "NVIDIA_DRIVER_MARKER",
    "docker_fact",
    "gpu_json",
    "gpu_notes",
    "libtorch_vendor",
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


def libtorch_vendor(name: str, directory: Path, recorded: dict[str, Any]) -> str:
    """The active variant's vendor: fdl's recorded facts when there are any (``variant.json``
    or floDl's ``.arch``), else its name as floDl reads it."""
    from fdl.compat.vendors import vendor_of_variant
    from fdl.libtorch.variants import ARCH_FILE, INFO_FILE

    has_facts = (directory / INFO_FILE).is_file() or (directory / ARCH_FILE).is_file()
    return vendor_of_variant(name, recorded if has_facts else None)
