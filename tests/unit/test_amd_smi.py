"""amd-smi and rocm-smi add what KFD lacks (marketing name, VRAM, driver version) to the
GPUs KFD lists, matched by PCI address; fake tools on PATH print the shapes of the real
ones (ROCm/amdsmi amdsmi_cli/amdsmi_commands.py static_gpu, rocm_smi_lib rocm_smi.py
formatJson), and garbage, a hang, a flood or a FIFO is ignored with a note."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fdl.runner import SubprocessRunner
from fdl.system import _smi
from fdl.system.survey import Survey, survey

# amd-smi up to ROCm 6.3: a bare list, one object per GPU (ROCm 6.4+: {"gpu_data": [...]})
AMD_SMI = [
    {
        "gpu": 0,
        "asic": {
            "market_name": "AMD Instinct MI210",
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "device_id": "0x740f",
            "target_graphics_version": "gfx90a",
        },
        "bus": {"bdf": "0000:23:00.0", "max_pcie_width": 16, "max_pcie_speed": "N/A"},
        "vram": {"type": "HBM", "vendor": "N/A", "size": {"value": 65520, "unit": "MB"}},
        "driver": {"name": "amdgpu", "version": "6.8.5"},
    },
    {
        "gpu": 1,
        "asic": {"market_name": "N/A", "target_graphics_version": "gfx1100"},
        "bus": {"bdf": "0000:03:00.0"},
        "vram": {"type": "GDDR6", "size": {"value": 20464, "unit": "MB"}},
        "driver": {"name": "amdgpu", "version": "6.8.5"},
    },
    {  # a GPU KFD does not list (another container's, a partition): not added
        "gpu": 2,
        "asic": {"market_name": "AMD Instinct MI300X"},
        "bus": {"bdf": "0000:c3:00.0"},
    },
]
ROCM_SMI = {
    "card0": {
        "Card series": "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900M]",
        "Card model": "0x5315",
        "Card vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "Card SKU": "EXT89885",
        "PCI Bus": "0000:03:00.0",
        "VRAM Total Memory (B)": "25753026560",
        "VRAM Total Used Memory (B)": "17117184",
    },
    "system": {"Driver version": "6.7.0"},
}


def _node(sys_root: Path, number: int, props: str, vram: int = 0) -> None:
    node = sys_root / "class/kfd/kfd/topology/nodes" / str(number)
    (node / "mem_banks/0").mkdir(parents=True)
    (node / "properties").write_text(props)
    (node / "mem_banks/0/properties").write_text(f"heap_type 1\nsize_in_bytes {vram}\n")


@pytest.fixture
def machine(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """Two AMD GPUs in KFD: gfx90a at 0000:23:00.0 without VRAM, gfx1100 at 0000:03:00.0
    with 24 GiB; the ROCm runtime; an empty bin/ as the only PATH."""
    sys_root = tmp_path / "sys"
    _node(sys_root, 0, "cpu_cores_count 16\nsimd_count 0\nvendor_id 4098\n")
    gpu = "simd_count 4\nvendor_id 4098\ndomain 0\nlocation_id {}\ngfx_target_version {}\n"
    _node(sys_root, 1, gpu.format(0x2300, 90010))
    _node(sys_root, 2, gpu.format(0x0300, 110000), 24 << 30)
    kfd = tmp_path / "kfd"
    kfd.write_text("")
    rocm = tmp_path / "rocm"
    (rocm / "lib").mkdir(parents=True)
    (rocm / "lib/libhsa-runtime64.so.1").write_text("")
    (tmp_path / "bin").mkdir()
    return {"ROCM_PATH": str(rocm), "FDL_NVML": "0", "PATH": ""}, sys_root, kfd


def _tool(bin_dir: Path, name: str, body: str) -> None:
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


def _printing(bin_dir: Path, name: str, text: str) -> None:
    (bin_dir / f"{name}.out").write_text(text)
    _tool(bin_dir, name, f"exec /bin/cat {bin_dir / name}.out")


def _amd(machine: tuple[dict[str, str], Path, Path], monkeypatch: pytest.MonkeyPatch) -> Survey:
    env, sys_root, kfd = machine
    bin_dir = sys_root.parent / "bin"
    monkeypatch.setenv("PATH", str(bin_dir))
    return survey(env, sys_root=sys_root, kfd=kfd, runner=SubprocessRunner())


def _amd_devices(found: Survey) -> list[tuple[str, str, int]]:
    return [(d.arch, d.name, d.vram_mb) for d in found.devices if d.vendor == "amd"]


@pytest.mark.parametrize("wrapped", [False, True], ids=["list", "gpu_data"])
def test_amd_smi_names_the_kfd_gpus_by_pci_address(
    machine: tuple[dict[str, str], Path, Path], monkeypatch: pytest.MonkeyPatch, wrapped: bool
) -> None:
    text = json.dumps({"gpu_data": AMD_SMI} if wrapped else AMD_SMI, indent=4)
    _printing(machine[1].parent / "bin", "amd-smi", text)
    _printing(machine[1].parent / "bin", "rocm-smi", "not asked when amd-smi is there")
    found = _amd(machine, monkeypatch)
    # KFD's order and archs; the name where the tool has one; VRAM only where KFD has none
    assert _amd_devices(found) == [
        ("gfx90a", "AMD Instinct MI210", 65520),
        ("gfx1100", "AMD GPU gfx1100", 24576),
    ]
    assert found.amd_driver == "6.8.5" and found.notes == ()
    assert [d.pci for d in found.devices] == ["0000:23:00.0", "0000:03:00.0"]


def test_rocm_smi_when_amd_smi_is_absent(
    machine: tuple[dict[str, str], Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _printing(machine[1].parent / "bin", "rocm-smi", json.dumps(ROCM_SMI))
    found = _amd(machine, monkeypatch)
    assert _amd_devices(found) == [
        ("gfx90a", "AMD GPU gfx90a", 0),
        ("gfx1100", "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900M]", 24576),
    ]
    assert found.amd_driver == "6.7.0"


HOSTILE = {
    "garbage": ("echo '\033[2J not json'", "cannot read"),
    "failing": ("echo 'ERROR: amdgpu not loaded' >&2; exit 4", "exit status 4"),
    "wrong shape": ("echo '{\"gpu_data\": [1, 2]}'", "cannot read"),
    "no bdf": ('echo \'[{"gpu": 0, "bus": {"bdf": "N/A"}}]\'', "cannot read"),
    "deep": ("/usr/bin/printf '%0.s[' $(/usr/bin/seq 100000)", "cannot read"),
    "hang": ("exec /bin/sleep 300", "did not finish within"),
    "flood": ("exec /usr/bin/yes 0000:23:00.0", "printed more than"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_tool_that_misbehaves_is_ignored_with_a_note(
    machine: tuple[dict[str, str], Path, Path], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    body, why = HOSTILE[case]
    _tool(machine[1].parent / "bin", "amd-smi", body)
    monkeypatch.setattr(_smi, "DEADLINE_S", 1.0)
    found = _amd(machine, monkeypatch)
    assert _amd_devices(found) == [
        ("gfx90a", "AMD GPU gfx90a", 0),
        ("gfx1100", "AMD GPU gfx1100", 24576),
    ]
    (note,) = found.notes
    assert (note.kind, note.vendor) == ("smi_unreadable", "amd") and why in note.message
    assert "\033" not in note.message and found.amd_driver is None


def test_a_fifo_named_amd_smi_is_not_run(
    machine: tuple[dict[str, str], Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = machine[1].parent / "bin" / "amd-smi"
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    found = _amd(machine, monkeypatch)
    (note,) = found.notes
    assert "is not a program" in note.message and len(found.devices) == 2


def test_no_gpu_in_kfd_asks_no_tool(
    machine: tuple[dict[str, str], Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "asked"
    _tool(machine[1].parent / "bin", "amd-smi", f"/usr/bin/touch {marker}; echo '[]'")
    env, _, kfd = machine
    monkeypatch.setenv("PATH", str(machine[1].parent / "bin"))
    found = survey(env, sys_root=tmp_path / "empty", kfd=kfd, runner=SubprocessRunner())
    assert not marker.exists() and found.notes == () and found.amd_driver is None


@pytest.mark.parametrize(
    ("size", "mb"),
    [
        ({"value": 65520, "unit": "MB"}, 65520),
        ({"value": 64, "unit": "GB"}, 65536),
        ("65520 MB", 65520),
        (65520, 65520),
        ({"value": "N/A", "unit": "MB"}, None),
        ({"value": -1, "unit": "MB"}, None),
        ({"value": 1e300, "unit": "MB"}, None),
        ({"value": 10, "unit": "parsecs"}, None),
        ({"value": {"value": 1}}, None),
        (True, None),
    ],
)
def test_vram_sizes_as_the_tools_write_them(size: object, mb: int | None) -> None:
    entry = {"bus": {"bdf": "0000:23:00.0"}, "vram": {"size": size}}
    report = _smi.parse_amd_smi(json.dumps([entry]))
    assert report is not None and report.gpus["0000:23:00.0"].vram_mb == mb
