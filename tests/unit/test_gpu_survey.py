"""GPUs of every vendor: floDl's FLODL_TESTING_GPU_JSON (both forms, refused when
malformed), and AMD GPUs read from a KFD topology behind floDl's gates (/dev/kfd, the ROCm
runtime), with hostile sysfs entries (a FIFO, a huge file, garbage) read as nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fdl.errors import UsageError
from fdl.system.survey import parse_spoof, read_kfd, rocm_runtime, survey


def test_a_list_of_devices_replaces_the_hardware() -> None:
    found = parse_spoof(
        '[{"vendor":"amd","arch":"gfx1030","vram_mb":16384,"name":"AMD Radeon RX 6800"},'
        '{"arch":"sm_61"},{"sm":"12.0","index":7}]'
    )
    assert [(d.index, d.vendor, d.arch, d.sm) for d in found.devices] == [
        (0, "amd", "gfx1030", ""),
        (1, "nvidia", "sm_61", "sm_61"),
        (7, "nvidia", "sm_120", "sm_120"),
    ]
    assert found.devices[0].to_json() == {
        "index": 0,
        "name": "AMD Radeon RX 6800",
        "vendor": "amd",
        "arch": "gfx1030",
        "sm": "",
        "vram_mb": 16384,
    }
    assert str(found.devices[2].capability) == "12.0" and found.devices[0].capability is None
    assert found.source == "FLODL_TESTING_GPU_JSON"


def test_the_envelope_carries_notes_and_a_probe_report_replays() -> None:
    message = "1 AMD GPU(s) present (gfx1100) but no ROCm runtime was found"
    found = parse_spoof(
        json.dumps(
            {
                "gpus": [],
                "notes": [{"vendor": "amd", "kind": "hardware_unusable", "message": message}],
            }
        )
    )
    assert found.devices == () and found.notes[0].message == message
    captured = {
        "gpus": [
            {
                "index": 0,
                "name": "x",
                "vendor": "nvidia",
                "arch": "sm_86",
                "sm": "sm_86",
                "vram_mb": 8,
            }
        ]
    }
    assert parse_spoof(json.dumps(captured["gpus"])).devices[0].arch == "sm_86"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "not JSON"),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ('"gfx90a"', "expected a list"),
        ('[{"vendor":"amd","arch":"sm_86"}]', "not a valid amd arch"),
        ('[{"vendor":"intel","arch":"xe"}]', "unknown vendor"),
        ('[{"arch":"sm_86","vram":1}]', "unknown key 'vram'"),
        ('[{"vendor":"amd"}]', "`arch` must be a string"),
        ('[{"arch":"sm_86","index":-1}]', "non-negative integer"),
        ('[{"arch":"sm_86","vram_mb":true}]', "non-negative integer"),
        ('{"gpus":{}}', "must be arrays"),
        ('{"notes":[{"vendor":"amd"}]}', "must be strings"),
        ("[1]", "not an object"),
        ("x" * (2 << 20), "characters"),
    ],
)
def test_a_malformed_spoof_is_refused_with_the_way_out(text: str, why: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_spoof(text)
    assert why in caught.value.message and "FLODL_TESTING_GPU_JSON" in caught.value.message
    assert "unset it" in (caught.value.hint or "")


def _node(sys_root: Path, number: int, props: str, bank: int | None = None) -> Path:
    node = sys_root / "class/kfd/kfd/topology/nodes" / str(number)
    node.mkdir(parents=True)
    (node / "properties").write_text(props)
    (node / "name").write_text("ip discovery\n")
    if bank is not None:
        (node / "mem_banks/0").mkdir(parents=True)
        (node / "mem_banks/0/properties").write_text(f"heap_type 1\nsize_in_bytes {bank}\n")
    return node


def _machine(tmp_path: Path) -> tuple[Path, Path, Path]:
    sys_root = tmp_path / "sys"
    _node(sys_root, 0, "cpu_cores_count 16\nsimd_count 0\nvendor_id 4098\ngfx_target_version 0\n")
    _node(sys_root, 1, "simd_count 440\nvendor_id 4098\ngfx_target_version 90010\n", 64 << 30)
    _node(sys_root, 2, "simd_count 240\nvendor_id 4098\ngfx_target_version 110000\n", 24 << 30)
    _node(sys_root, 10, "simd_count 80\nvendor_id 4318\ngfx_target_version 0\n")  # not AMD
    kfd = tmp_path / "dev" / "kfd"
    kfd.parent.mkdir()
    kfd.write_text("")
    rocm = tmp_path / "opt" / "rocm"
    (rocm / "lib").mkdir(parents=True)
    (rocm / "lib" / "libhsa-runtime64.so.1").write_text("")
    return sys_root, kfd, rocm


def test_amd_gpus_are_read_from_the_kfd_topology_in_node_order(tmp_path: Path) -> None:
    sys_root, kfd, rocm = _machine(tmp_path)
    devices, notes = read_kfd(sys_root, kfd, rocm)
    assert notes == []
    assert [(d.index, d.vendor, d.arch, d.vram_mb, d.name) for d in devices] == [
        (0, "amd", "gfx90a", 65536, "AMD GPU gfx90a"),
        (1, "amd", "gfx1100", 24576, "AMD GPU gfx1100"),
    ]


def test_an_amd_card_that_cannot_run_is_a_note_saying_why(tmp_path: Path) -> None:
    sys_root, kfd, rocm = _machine(tmp_path)
    devices, notes = read_kfd(sys_root, kfd, None)
    assert (
        devices == []
        and "no ROCm runtime" in notes[0].message
        and "gfx90a, gfx1100" in notes[0].message
    )
    devices, notes = read_kfd(sys_root, tmp_path / "no-kfd", rocm)
    assert devices == [] and "--device=/dev/kfd" in notes[0].message
    assert {n.kind for n in notes} == {"hardware_unusable"}


def test_hostile_sysfs_entries_read_as_nothing(tmp_path: Path) -> None:
    sys_root, kfd, rocm = _machine(tmp_path)
    fifo_node = sys_root / "class/kfd/kfd/topology/nodes/3"
    fifo_node.mkdir()
    os.mkfifo(fifo_node / "properties")
    huge = _node(sys_root, 4, "vendor_id 4098\n")
    (huge / "properties").write_text("simd_count 1\n" * 100_000)
    _node(sys_root, 5, "simd_count 9" + "9" * 5000 + "\nvendor_id 4098\ngfx_target_version 90010\n")
    _node(sys_root, 6, "\x1b[2J garbage \x00\nvendor_id 4098\nsimd_count 4\ngfx_target_version 1\n")
    _node(sys_root, 7, "vendor_id 4098\nsimd_count 4\ngfx_target_version 1011299\n")
    _node(sys_root, 8, "junk\nvendor_id 4098\nsimd_count 4\ngfx_target_version 120001\n")
    (sys_root / "class/kfd/kfd/topology/nodes/9").mkdir()  # no properties at all
    devices, _ = read_kfd(sys_root, kfd, rocm)
    # versions that spell no gfx name (gfx001, gfx101299) are not GPUs
    assert [d.arch for d in devices] == ["gfx90a", "gfx1100", "gfx1201"]


def test_the_rocm_runtime_is_found_in_floDls_order(tmp_path: Path) -> None:
    _, _, rocm = _machine(tmp_path)
    assert rocm_runtime({"ROCM_PATH": str(rocm)}) == rocm
    assert rocm_runtime({"ROCM_PATH": str(tmp_path / "none"), "HIP_PATH": str(rocm)}) == rocm


def test_the_spoof_wins_over_the_hardware(tmp_path: Path) -> None:
    sys_root, kfd, rocm = _machine(tmp_path)
    env = {"FLODL_TESTING_GPU_JSON": '[{"arch":"sm_86"}]', "ROCM_PATH": str(rocm), "PATH": ""}
    found = survey(env, sys_root=sys_root, kfd=kfd)
    assert [d.arch for d in found.devices] == ["sm_86"]
    real = survey({"PATH": "", "FDL_NVML": "0", "ROCM_PATH": str(rocm)}, sys_root=sys_root, kfd=kfd)
    amd = [
        d.arch for d in real.devices if d.vendor == "amd"
    ]  # a GPU machine lists its NVIDIA ones too
    assert amd == ["gfx90a", "gfx1100"] and real.source == "hardware"
