"""Verifying a variant: its files, the archs in its binaries vs metadata vs GPUs, its libraries."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.binaries.synthetic import build_elf
from fdl.compat import parse_capability
from fdl.diagnose import Severity
from fdl.libtorch import (
    VariantInfo,
    detect_abi,
    finish_info,
    scan_device_code,
    variants,
    verify_variant,
)
from fdl.system import Gpu, GpuReport
from tests.support.libtorch_trees import make_tree


def gpus(*caps: str, driver: str = "580.65") -> GpuReport:
    return GpuReport(
        tuple(
            Gpu(i, f"NVIDIA Test GPU {c}", parse_capability(c), 8192, driver)
            for i, c in enumerate(caps)
        ),
        driver,
    )


def severities(report, group: str) -> dict[str, str]:
    return {c.name: c.severity.value for c in report.checks if c.group == group}


def installed(tmp_path: Path, name: str, info: VariantInfo, **tree: object) -> Path:
    path = make_tree(tmp_path / name, **tree)
    variants.write_info(path, finish_info(path, info))
    return path


def test_scan_reads_archs_from_the_fatbin(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t", "2.14.1+cu130", cubins=[75, 80, 120], ptx=[120])
    scan = scan_device_code(tree)
    assert scan.archs_found() == {
        "cubin": ["sm_75", "sm_80", "sm_120"],
        "ptx": ["compute_120"],
        "extra": [],
    }
    assert scan.verdict(parse_capability("8.6")).match.value == "compatible"
    assert scan.verdict(parse_capability("6.1")).ok is False
    assert detect_abi(tree) == "cxx11"


def test_cpu_variant_without_gpus_is_clean(tmp_path: Path) -> None:
    info = VariantInfo(name="precompiled/cpu", torch="2.13.0", source={"kind": "download"})
    path = installed(tmp_path, "cpu", info)
    report = verify_variant(path, "precompiled/cpu", gpus=GpuReport(reason="no nvidia-smi"))
    assert report.ok, [c for c in report.checks if c.severity is Severity.ERROR]
    assert severities(report, "files")["lib/libtorch.so"] == "ok"
    assert severities(report, "archs")["gpu code"] == "ok"
    assert severities(report, "libraries")["dependencies"] == "ok"
    assert report.to_json()["archs_found"] == {"cubin": [], "ptx": []}


def test_uncovered_gpu_is_an_error_with_a_build_fix(tmp_path: Path) -> None:
    info = VariantInfo(
        name="precompiled/cu130",
        torch="2.14.1",
        cuda="13.0",
        archs_requested=["sm_75", "sm_120", "compute_120"],
        source={"kind": "download"},
    )
    extra = {"lib/libcudart.so.13": build_elf(soname="libcudart.so.13")}
    path = installed(
        tmp_path, "cu130", info, version="2.14.1+cu130", cubins=[75, 120], extra_libs=extra
    )
    report = verify_variant(path, "precompiled/cu130", gpus=gpus("12.0", "6.1"))
    assert not report.ok
    gpu1 = next(c for c in report.checks if c.name == "GPU 1")
    assert gpu1.severity is Severity.ERROR
    assert "sm_61" in gpu1.message and "not covered by precompiled/cu130" in gpu1.message
    assert gpu1.fix == "fdl libtorch build --archs 6.1,12.0 --torch 2.14.1"
    assert next(c for c in report.checks if c.name == "GPU 0").severity is Severity.OK
    # documented +PTX but the binary has none: a warning for an official build
    requested = next(c for c in report.checks if c.name == "requested")
    assert requested.severity is Severity.INFO and "compute_120" in requested.message


def test_missing_requested_arch_is_an_error_for_a_source_build(tmp_path: Path) -> None:
    info = VariantInfo(
        name="builds/sm61-sm120",
        torch="2.14.1",
        cuda="12.8",
        archs_requested=["sm_61", "sm_120"],
        source={"kind": "build"},
    )
    path = installed(tmp_path, "b", info, version="2.14.1", cubins=[120], cuda_needed=())
    report = verify_variant(path, "builds/sm61-sm120")
    requested = next(c for c in report.checks if c.name == "requested")
    assert requested.severity is Severity.ERROR
    assert requested.data["missing"] == ["sm_61"]


def test_changed_binaries_are_reported(tmp_path: Path) -> None:
    info = VariantInfo(name="builds/x", torch="2.14.1", cuda="12.8", source={"kind": "build"})
    path = installed(tmp_path, "x", info, version="2.14.1", cubins=[61, 120], cuda_needed=())
    make_tree(path, "2.14.1", cubins=[120], cuda_needed=())  # overwritten after install
    report = verify_variant(path, "builds/x")
    recorded = next(c for c in report.checks if c.name == "recorded")
    assert recorded.severity is Severity.ERROR and "sm_61" in recorded.message


def test_missing_libraries_are_named(tmp_path: Path) -> None:
    info = VariantInfo(
        name="precompiled/cu130", torch="2.14.1", cuda="13.0", source={"kind": "wheel"}
    )
    path = installed(
        tmp_path,
        "w",
        info,
        version="2.14.1+cu130",
        cubins=[120],
        cuda_needed=("libnvfake.so.99", "libcublasfake.so.13"),
    )
    report = verify_variant(path, "precompiled/cu130")
    dependencies = next(c for c in report.checks if c.name == "dependencies")
    assert dependencies.severity is Severity.ERROR
    assert dependencies.data["missing"] == ["libcublasfake.so.13", "libnvfake.so.99"]
    assert "--from-wheel" in (dependencies.fix or "")


def test_metadata_contradicting_the_binaries(tmp_path: Path) -> None:
    path = make_tree(tmp_path / "v", "2.14.1", cubins=[120], cuda_needed=())
    variants.write_info(path, VariantInfo(name="precompiled/cpu", torch="2.14.1"))
    report = verify_variant(path, "precompiled/cpu")
    code = next(c for c in report.checks if c.name == "gpu code")
    assert code.severity is Severity.ERROR and "CPU build" in code.message


def test_hand_made_tree_gets_a_metadata_warning_and_missing_files(tmp_path: Path) -> None:
    path = make_tree(tmp_path / "hand", "2.13.0+cpu")
    (path / "share/cmake/Torch/TorchConfig.cmake").unlink()
    report = verify_variant(path, "precompiled/hand")
    assert severities(report, "files")["metadata"] == "warning"
    assert severities(report, "files")["share/cmake/Torch/TorchConfig.cmake"] == "error"


@pytest.mark.parametrize(("driver", "ok"), [("580.65", True), ("550.54", False)])
def test_driver_floor_of_the_variant_cuda(tmp_path: Path, driver: str, ok: bool) -> None:
    info = VariantInfo(name="builds/d", torch="2.14.1", cuda="13.0", source={"kind": "build"})
    path = installed(tmp_path, "d", info, version="2.14.1", cubins=[120], cuda_needed=())
    report = verify_variant(path, "builds/d", gpus=gpus("12.0", driver=driver))
    check = next(c for c in report.checks if c.name == "driver")
    assert (check.severity is Severity.OK) is ok


def _cudnn_variant(tmp_path: Path, name: str, extra: dict) -> Path:
    """A cu130 variant whose lib/ holds cuDNN 9.10's parts (no _ext, no _tensor_ir)."""
    parts = [
        "graph",
        "ops",
        "cnn",
        "adv",
        "heuristic",
        "engines_precompiled",
        "engines_runtime_compiled",
    ]
    libs = {f"lib/libcudnn_{p}.so.9": build_elf(soname=f"libcudnn_{p}.so.9") for p in parts}
    libs["lib/libcudnn.so.9"] = build_elf(soname="libcudnn.so.9")
    info = VariantInfo(
        name="precompiled/cu130",
        torch="2.14.1",
        cuda="13.0",
        cudnn="9.10.2.21",
        source={"kind": "wheel"},
        extra=extra,
    )
    return installed(
        tmp_path,
        name,
        info,
        version="2.14.1+cu130",
        cubins=[120],
        cuda_needed=("libcudnn.so.9",),
        extra_libs=libs,
    )


def test_cudnn_parts_a_bundled_wheel_did_not_ship_are_not_missing(tmp_path: Path) -> None:
    """fdl copied every library of nvidia-cudnn 9.10's wheel: the parts 9.13 added are not
    missing there (issue 34, point 14); a tree fdl did not assemble still gets the
    warning."""
    copied = ["libcudnn.so.9", "libcudnn_graph.so.9", "libcudnn_ops.so.9"]
    bundled = {
        "nvidia_libraries": {
            "origin": "wheels",
            "packages": [{"from": "nvidia_cudnn_cu13-9.10.2.21.whl", "libraries": copied}],
        }
    }
    report = verify_variant(_cudnn_variant(tmp_path, "bundled", bundled), "precompiled/cu130")
    assert "dlopened" not in severities(report, "libraries"), report.checks
    other = verify_variant(_cudnn_variant(tmp_path, "other", {}), "precompiled/cu130")
    dlopened = next(c for c in other.checks if c.name == "dlopened")
    assert dlopened.severity is Severity.WARNING
    assert "libcudnn_ext.so.9" in dlopened.message
