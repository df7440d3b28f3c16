"""Every GPU here, of any vendor, and what keeps a GPU that is present from being usable.

NVIDIA GPUs come from :func:`fdl.system.gpus.detect_gpus` (NVML, ``nvidia-smi``); AMD GPUs
from the kernel's KFD topology (``/sys/class/kfd/kfd/topology/nodes/*/properties``: a node
with AMD's PCI vendor id and a non-zero ``simd_count``; its ``gfx_target_version`` encodes
the gfx name), behind the gates floDl's ``flodl-hw`` 0.8.0 applies (``src/amd.rs``): the
device node ``/dev/kfd``, a ROCm runtime (``libhsa-runtime64.so``), and permission to open
it. An AMD card that fails a gate is not a device but a *note* saying why. Where
``amd-smi`` or ``rocm-smi`` is on PATH, it adds what KFD lacks (the marketing name, VRAM,
the driver's version; :mod:`fdl.system._smi`), matched by PCI address; KFD still says
which GPUs exist.

``FLODL_TESTING_GPU_JSON`` replaces the hardware, in floDl's format (``flodl-hw``
``src/testing.rs``): a JSON list of ``{vendor, arch, vram_mb, name, index}`` (``sm`` an
alias of ``arch``; ``vendor`` defaults to ``nvidia``; unknown keys refused), or an envelope
``{"gpus": [...], "notes": [{vendor, kind, message}]}``, so a captured ``fdl probe --json``
replays. floDl panics on a malformed value; fdl refuses it with exit 2.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl._files import NotARegularFile, read_small_text
from fdl.compat.archs import Capability
from fdl.compat.rocm import parse_gfx
from fdl.errors import UsageError

if TYPE_CHECKING:
    from fdl.runner import Runner
    from fdl.system.gpus import GpuReport

__all__ = [
    "Device",
    "Note",
    "Survey",
    "nvidia_report",
    "parse_spoof",
    "read_kfd",
    "survey",
    "with_smi",
]

SPOOF_ENV = "FLODL_TESTING_GPU_JSON"
AMD_VENDOR_ID = 0x1002
_DEVICE_KEYS = {"index", "vendor", "name", "arch", "sm", "vram_mb"}
_NOTE_KEYS = {"vendor", "kind", "message"}
_VENDORS = ("nvidia", "amd")
_SM = re.compile(r"^(?:sm_?)?(\d{1,2})\.?(\d)([af]?)$")
_MAX_SPOOF = 1 << 20
_MAX_NODES = 256


@dataclass(frozen=True)
class Device:
    """One usable GPU.

    Attributes:
        index: Its index in its vendor's runtime (CUDA or HIP device order).
        vendor: ``nvidia`` or ``amd``.
        name: ``NVIDIA GeForce GTX 1060 6GB``; ``AMD GPU gfx90a`` (KFD has no marketing name).
        arch: ``sm_61`` or ``gfx90a``.
        vram_mb: Total memory in MiB (0: not reported).
        pci: Its PCI address (``0000:23:00.0``; ``""``: not known), how a management
            tool's GPU is matched to KFD's.
    """

    index: int
    vendor: str
    name: str
    arch: str
    vram_mb: int
    pci: str = ""

    @property
    def capability(self) -> Capability | None:
        """An NVIDIA GPU's compute capability; None for AMD."""
        found = _SM.match(self.arch) if self.vendor == "nvidia" else None
        return Capability(int(found.group(1)), int(found.group(2))) if found else None

    @property
    def sm(self) -> str:
        """floDl's legacy ``sm`` key: ``sm_61`` for NVIDIA, ``""`` for any other vendor."""
        return self.arch if self.vendor == "nvidia" else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "vendor": self.vendor,
            "arch": self.arch,
            "sm": self.sm,
            "vram_mb": self.vram_mb,
        }


@dataclass(frozen=True)
class Note:
    """Why a GPU that is present is not usable (``kind``: ``hardware_unusable``), or
    something worth knowing about one."""

    vendor: str
    kind: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"vendor": self.vendor, "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class Survey:
    """The usable GPUs of every vendor, and the notes on those that are not.

    Attributes:
        devices: Usable GPUs, NVIDIA first, each vendor in its runtime's order.
        notes: Findings (an AMD card without the ROCm runtime, ...).
        source: ``hardware`` or ``FLODL_TESTING_GPU_JSON``.
        nvidia_driver: The NVIDIA driver version, when there is one.
        amd_driver: The amdgpu driver's version, when ``amd-smi``/``rocm-smi`` said it.
    """

    devices: tuple[Device, ...] = ()
    notes: tuple[Note, ...] = ()
    source: str = "hardware"
    nvidia_driver: str | None = None
    amd_driver: str | None = None

    def vendors(self) -> set[str]:
        return {d.vendor for d in self.devices} | {n.vendor for n in self.notes}


def _spoof_error(why: str) -> UsageError:
    return UsageError(
        f"${SPOOF_ENV} is set but cannot be read: {why}",
        hint='give a JSON list such as [{"vendor":"amd","arch":"gfx1030","vram_mb":16384}] '
        'or {"gpus":[...],"notes":[...]}, or unset it to use the real hardware',
    )


def parse_spoof(text: str) -> Survey:
    """The survey ``FLODL_TESTING_GPU_JSON`` describes.

    Raises:
        UsageError: the value is not such JSON (too long, too deep, a wrong type, an
            unknown key, an arch that is not the vendor's).
    """
    if len(text) > _MAX_SPOOF:
        raise _spoof_error(f"{len(text)} characters (at most {_MAX_SPOOF})")
    try:
        root = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _spoof_error(f"not JSON ({str(exc)[:120]})") from None
    devices: list[Any]
    notes: list[Any]
    if isinstance(root, list):
        devices, notes = root, []
    elif isinstance(root, dict):
        devices = [] if root.get("gpus") is None else root["gpus"]
        notes = [] if root.get("notes") is None else root["notes"]
        if not isinstance(devices, list) or not isinstance(notes, list):
            raise _spoof_error("`gpus` and `notes` must be arrays")
    else:
        raise _spoof_error('expected a list of devices or a {"gpus": [...]} envelope')
    return Survey(
        tuple(_spoofed_device(d, i) for i, d in enumerate(devices)),
        tuple(_spoofed_note(n) for n in notes),
        source=SPOOF_ENV,
    )


def _spoofed_device(entry: object, position: int) -> Device:
    where = f"device {position}"
    if not isinstance(entry, dict):
        raise _spoof_error(f"{where} is not an object")
    unknown = sorted(str(k)[:40] for k in entry if k not in _DEVICE_KEYS)
    if unknown:
        raise _spoof_error(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_DEVICE_KEYS))})"
        )
    fields = {k: v for k, v in entry.items() if v is not None}
    vendor = fields.get("vendor", "nvidia")
    if vendor not in _VENDORS:
        raise _spoof_error(f"{where}: unknown vendor {str(vendor)[:40]!r} (nvidia or amd)")
    raw = fields.get("arch", fields.get("sm"))
    if not isinstance(raw, str):
        raise _spoof_error(f"{where}: `arch` must be a string (sm_86, gfx1030)")
    arch = _arch(vendor, raw)
    if arch is None:
        raise _spoof_error(f"{where}: {raw[:40]!r} is not a valid {vendor} arch")
    index = fields.get("index", position)
    memory = fields.get("vram_mb", 0)
    for key, value in (("index", index), ("vram_mb", memory)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 40:
            raise _spoof_error(f"{where}: `{key}` must be a non-negative integer")
    name = fields.get("name", f"{vendor} spoofed {arch}")
    if not isinstance(name, str):
        raise _spoof_error(f"{where}: `name` must be a string")
    return Device(index, vendor, name[:200], arch, memory)


def _arch(vendor: str, raw: str) -> str | None:
    text = raw.strip().lower()
    if vendor == "amd":
        target = parse_gfx(text)
        return str(target) if target else None
    found = _SM.match(text)
    return f"sm_{found.group(1)}{found.group(2)}{found.group(3)}" if found else None


def _spoofed_note(entry: object) -> Note:
    if not isinstance(entry, dict) or any(k not in _NOTE_KEYS for k in entry):
        raise _spoof_error(f"a note must be an object with {', '.join(sorted(_NOTE_KEYS))}")
    values = [entry.get(k) for k in ("vendor", "kind", "message")]
    if not all(isinstance(v, str) for v in values):
        raise _spoof_error("a note's vendor, kind and message must be strings")
    vendor, kind, message = (str(v)[:2000] for v in values)
    return Note(vendor, kind, message)


def _properties(path: Path) -> dict[str, int]:
    """A KFD ``properties`` file's ``key value`` lines (bounded; a FIFO or device is empty)."""
    try:
        text = read_small_text(path, limit=1 << 16) or ""
    except (NotARegularFile, OSError):
        return {}
    found: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isascii() and parts[1].isdigit() and len(parts[1]) < 20:
            found[parts[0]] = int(parts[1])
    return found


def _gfx(version: int) -> str | None:
    """``gfx90a`` from ``gfx_target_version`` 90010 (major*10000 + minor*100 + step, the
    step written in hex); None for 0 (not published) or a version no gfx name spells."""
    if version <= 0:
        return None
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    target = parse_gfx(f"gfx{major}{minor}{step:x}")
    return target.processor if target else None


def read_kfd(sys_root: Path, kfd: Path, rocm: Path | None) -> tuple[list[Device], list[Note]]:
    """The AMD GPUs of a KFD topology under ``sys_root``, behind floDl's gates."""
    nodes_dir = sys_root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    try:
        nodes = sorted(
            (int(p.name), p) for p in nodes_dir.iterdir() if p.name.isdigit() and len(p.name) < 6
        )[:_MAX_NODES]
    except OSError:
        nodes = []
    found: list[Device] = []
    for _, node in nodes:
        props = _properties(node / "properties")
        if props.get("vendor_id") != AMD_VENDOR_ID or not props.get("simd_count"):
            continue  # another vendor's node, or the CPU node (no shader engines)
        arch = _gfx(props.get("gfx_target_version", 0))
        if arch is None:
            continue
        pci = ""
        if "location_id" in props:
            from fdl.system._smi import pci_address

            pci = pci_address(props.get("domain", 0), props["location_id"])
        name = f"AMD GPU {arch}"
        found.append(Device(len(found), "amd", name, arch, _memory_mb(node), pci))
    if not found:
        return [], []
    archs = ", ".join(d.arch for d in found)
    if not kfd.exists():
        message = (
            f"the kernel lists {len(found)} AMD GPU(s) ({archs}) but {kfd} does not exist, so "
            "no process can open them; in a container add --device=/dev/kfd --device=/dev/dri"
        )
        return [], [Note("amd", "hardware_unusable", message)]
    if rocm is None:
        message = (
            f"{len(found)} AMD GPU(s) present ({archs}) but no ROCm runtime was found "
            "(libhsa-runtime64.so under $ROCM_PATH, $HIP_PATH, $HSA_PATH or /opt/rocm); "
            "install ROCm to train on them"
        )
        return [], [Note("amd", "hardware_unusable", message)]
    if not os.access(kfd, os.R_OK | os.W_OK):
        message = (
            f"{len(found)} AMD GPU(s) present ({archs}) but this user cannot open {kfd}: "
            "add it to the render and video groups (sudo usermod -aG render,video $USER, "
            "then log in again)"
        )
        return [], [Note("amd", "hardware_unusable", message)]
    return found, []


def _memory_mb(node: Path) -> int:
    try:
        banks = list((node / "mem_banks").iterdir())[:64]
    except OSError:
        return 0
    sizes = [_properties(bank / "properties").get("size_in_bytes", 0) for bank in banks]
    return max(sizes, default=0) // (1 << 20)


def with_smi(devices: list[Device], run: Runner) -> tuple[list[Device], list[Note], str | None]:
    """``devices`` (usable AMD GPUs of KFD) with what ``amd-smi``/``rocm-smi`` adds: the
    marketing name, VRAM where KFD has none; the notes (a tool whose output was ignored);
    the driver's version. Nothing is asked when there is no device."""
    if not devices:
        return devices, [], None
    from fdl.system._smi import ask_smi

    report = ask_smi(run)
    if report.problem is not None:
        return devices, [Note("amd", "smi_unreadable", report.problem)], None
    merged = []
    for device in devices:
        said = report.gpus.get(device.pci) if device.pci else None
        merged.append(
            device
            if said is None
            else replace(
                device,
                name=said.name or device.name,
                vram_mb=device.vram_mb or said.vram_mb or 0,
            )
        )
    return merged, [], report.driver


def rocm_runtime(environ: Mapping[str, str]) -> Path | None:
    """The ROCm installation whose ``lib/libhsa-runtime64.so*`` exists, in floDl's order
    (``rocm.yaml``'s ``runtime``): ``$ROCM_PATH``, ``$HIP_PATH``, ``$HSA_PATH``, ``/opt/rocm``."""
    from fdl.compat.rocm import rocm_runtime_facts

    facts = rocm_runtime_facts()
    roots = [environ.get(k, "") for k in facts.path_env]
    for root in [*(r for r in roots if r), facts.default_root]:
        lib = Path(root) / "lib"
        try:
            if any(p.name.startswith("libhsa-runtime64.so") for p in lib.iterdir()):
                return Path(root)
        except OSError:
            continue
    return None


def survey(
    environ: Mapping[str, str] | None = None,
    *,
    sys_root: Path = Path("/sys"),
    kfd: Path = Path("/dev/kfd"),
    nvidia: GpuReport | None = None,
    runner: Runner | None = None,
) -> Survey:
    """The GPUs of every vendor here (or those ``FLODL_TESTING_GPU_JSON`` describes).

    Args:
        nvidia: The NVIDIA report when the caller has it already (detected once).
        runner: Runs ``amd-smi``/``rocm-smi`` (default: the process-wide runner).

    Raises:
        UsageError: ``FLODL_TESTING_GPU_JSON`` is set and malformed.
    """
    env = os.environ if environ is None else environ
    spoof = env.get(SPOOF_ENV, "")
    if spoof.strip():
        return parse_spoof(spoof)
    from fdl.system.gpus import detect_gpus

    report = nvidia if nvidia is not None else detect_gpus(environ=dict(env))
    found = [
        Device(g.index, "nvidia", g.name, g.capability.sm, g.memory_mib or 0)
        for g in report.gpus
        if g.capability is not None
    ]
    amd, notes = read_kfd(sys_root, kfd, rocm_runtime(env))
    from fdl.runner import default_runner

    amd, smi_notes, amd_driver = with_smi(amd, runner or default_runner())
    return Survey(
        tuple(found + amd),
        tuple(notes + smi_notes),
        nvidia_driver=report.driver,
        amd_driver=amd_driver,
    )


def nvidia_report(found: Survey) -> GpuReport:
    """The NVIDIA part of a survey as :func:`~fdl.system.gpus.detect_gpus` reports it (for
    a spoofed survey: the planners read GPU reports)."""
    from fdl.system.gpus import Gpu, GpuReport

    gpus = tuple(
        Gpu(d.index, d.name, d.capability, d.vram_mb or None, found.nvidia_driver)
        for d in found.devices
        if d.vendor == "nvidia"
    )
    reason = None if gpus else f"no NVIDIA GPU in ${SPOOF_ENV}"
    return GpuReport(gpus, found.nvidia_driver, reason, source=found.source)
