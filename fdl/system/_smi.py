"""AMD's management tools, asked what the KFD topology does not say: a GPU's marketing
name, its VRAM, the amdgpu driver's version.

KFD stays the source of truth for which GPUs exist: a tool's GPU is matched to a KFD node
by PCI address (the node's ``domain`` and ``location_id``, the tool's BDF) and only adds
to it. ``amd-smi`` is asked first (AMD's successor of ``rocm-smi``), else ``rocm-smi``;
one run, under a deadline and an output bound (:data:`DEADLINE_S`, :data:`MAX_OUTPUT`).
A tool that hangs, prints too much, is not a program or prints what is not its JSON is
ignored, and a note says so.

The shapes, read in the tools' source:

- ``amd-smi static --asic --bus --vram --driver --json`` (ROCm/amdsmi
  ``amdsmi_cli/amdsmi_commands.py`` ``static_gpu``; ``amdsmi_logger.py``
  ``_print_json_output``): a list of ``{"gpu": N, "asic": {"market_name",
  "target_graphics_version", ...}, "bus": {"bdf", ...}, "vram": {"size": {"value": 65520,
  "unit": "MB"}, ...}, "driver": {"name", "version"}}``, ``"N/A"`` where the library could
  not tell; later releases (ROCm 6.4, 7.x) wrap the list as ``{"gpu_data": [...]}``.
- ``rocm-smi --showproductname --showbus --showmeminfo vram --showdriverversion --json``
  (ROCm/rocm_smi_lib ``python_smi_tools/rocm_smi.py``: ``formatJson``, ``showProductName``,
  ``showBus``, ``showMemInfo``, ``showDriverVersion``): ``{"card0": {"Card series": ...,
  "PCI Bus": "0000:03:00.0", "VRAM Total Memory (B)": "17163091968", ...}, "system":
  {"Driver version": "6.7.0"}}``, every value a string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._text import printable
from fdl.errors import FdlError
from fdl.runner import Runner

__all__ = [
    "DEADLINE_S",
    "MAX_OUTPUT",
    "SmiGpu",
    "SmiReport",
    "ask_smi",
    "parse_amd_smi",
    "parse_rocm_smi",
]

DEADLINE_S = 10.0
MAX_OUTPUT = 1 << 20
AMD_SMI = ("amd-smi", "static", "--asic", "--bus", "--vram", "--driver", "--json")
ROCM_SMI = (
    "rocm-smi",
    "--showproductname",
    "--showbus",
    "--showmeminfo",
    "vram",
    "--showdriverversion",
    "--json",
)
_BDF = re.compile(r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")
_MAX_GPUS = 256
_UNITS_MB = {"b": 1 / (1 << 20), "kb": 1 / 1024, "mb": 1, "mib": 1, "gb": 1024, "gib": 1024}


@dataclass(frozen=True)
class SmiGpu:
    """What a tool says of one GPU (None: not said)."""

    name: str | None = None
    vram_mb: int | None = None


@dataclass(frozen=True)
class SmiReport:
    """What the tool said, by PCI address (``0000:23:00.0``).

    Attributes:
        tool: ``amd-smi`` or ``rocm-smi`` (None: neither is on PATH).
        gpus: Its GPUs by BDF.
        driver: The amdgpu driver's version.
        problem: Why what it printed was ignored (None: it was read).
    """

    tool: str | None = None
    gpus: dict[str, SmiGpu] = field(default_factory=dict)
    driver: str | None = None
    problem: str | None = None


def pci_address(domain: int, location: int) -> str:
    """The BDF of a KFD node's ``domain`` and ``location_id`` (bus << 8 | device << 3 | fn)."""
    return f"{domain:04x}:{location >> 8 & 0xFF:02x}:{location >> 3 & 0x1F:02x}.{location & 7}"


def _bdf(value: object) -> str | None:
    found = _BDF.fullmatch(value.strip().lower()) if isinstance(value, str) else None
    if found is None:
        return None
    domain, bus, device, function = found.groups()
    return f"{int(domain, 16):04x}:{bus}:{device}.{function}"


def _text(value: object, limit: int = 120) -> str | None:
    if not isinstance(value, str) or not value.strip() or value.strip().upper() == "N/A":
        return None
    return printable(value.strip(), limit)


def _megabytes(value: object, unit: object = "MB") -> int | None:
    """VRAM as amd-smi writes it: ``{"value": 65520, "unit": "MB"}``, ``"65520 MB"`` or
    a bare number of MB; rocm-smi: bytes as a string (``unit`` ``B``)."""
    if isinstance(value, dict):
        given: dict[str, object] = value
        value, unit = given.get("value"), given.get("unit", unit)
    if isinstance(value, str):
        number, _, written = value.strip().partition(" ")
        unit = written.strip() or unit
        value = int(number) if number.isascii() and number.isdigit() and len(number) < 20 else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(unit, str):
        return None
    scale = _UNITS_MB.get(unit.strip().lower())
    if scale is None or not 0 < value < 1 << 62:
        return None
    return int(value * scale) or None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def parse_amd_smi(text: str) -> SmiReport | None:
    """``amd-smi static ... --json``'s GPUs, or None when ``text`` is not that shape."""
    root = _loads(text)
    if isinstance(root, dict):
        root = root.get("gpu_data")
    if not isinstance(root, list) or not all(isinstance(g, dict) for g in root):
        return None
    gpus: dict[str, SmiGpu] = {}
    drivers: list[str] = []
    for entry in root[:_MAX_GPUS]:
        sections = {k: entry.get(k) for k in ("asic", "bus", "vram", "driver")}
        asic, bus, vram, driver = (s if isinstance(s, dict) else {} for s in sections.values())
        bdf = _bdf(bus.get("bdf"))
        if bdf is not None:
            gpus[bdf] = SmiGpu(_text(asic.get("market_name")), _megabytes(vram.get("size")))
        version = _text(driver.get("version"), 64)
        if version:
            drivers.append(version)
    if root and not gpus:
        return None
    return SmiReport("amd-smi", gpus, drivers[0] if drivers else None)


def parse_rocm_smi(text: str) -> SmiReport | None:
    """``rocm-smi ... --json``'s GPUs, or None when ``text`` is not that shape."""
    root = _loads(text)
    if not isinstance(root, dict) or not all(isinstance(v, dict) for v in root.values()):
        return None
    gpus: dict[str, SmiGpu] = {}
    for key, card in list(root.items())[:_MAX_GPUS]:
        if not key.startswith("card"):
            continue
        fields = {str(k).lower(): v for k, v in card.items()}
        bdf = _bdf(fields.get("pci bus"))
        if bdf is not None:
            name = _text(fields.get("card series"))
            gpus[bdf] = SmiGpu(name, _megabytes(fields.get("vram total memory (b)"), "B"))
    system = {str(k).lower(): v for k, v in (root.get("system") or {}).items()}
    if not gpus:
        return None
    return SmiReport("rocm-smi", gpus, _text(system.get("driver version"), 64))


def ask_smi(run: Runner) -> SmiReport:
    """Ask ``amd-smi``, else ``rocm-smi``, whichever is on PATH (never raises)."""
    for argv, parse in ((AMD_SMI, parse_amd_smi), (ROCM_SMI, parse_rocm_smi)):
        program = run.which(argv[0])
        if program is None:
            continue
        tool = argv[0]
        if not Path(program).is_file():
            return SmiReport(tool, problem=f"{program} is not a program (ignored)")
        try:
            result = run.run(
                [program, *argv[1:]], check=False, timeout=DEADLINE_S, max_output=MAX_OUTPUT
            )
        except (FdlError, OSError) as exc:
            why = exc.message if isinstance(exc, FdlError) else str(exc)
            return SmiReport(tool, problem=f"{tool} could not be read: {printable(why, 200)}")
        report = parse(result.stdout) if result.returncode == 0 else None
        if report is None:
            shown = printable((result.stdout or result.stderr).strip()[:80], 80) or "nothing"
            status = f" (exit status {result.returncode})" if result.returncode else ""
            return SmiReport(tool, problem=f"{tool} printed what fdl cannot read{status}: {shown}")
        return report
    return SmiReport()
