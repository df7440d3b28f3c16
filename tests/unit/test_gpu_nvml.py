"""GPU detection through NVML: the reading code against a stand-in with pynvml's API (NVML
cannot run here without a GPU), the real nvidia-ml-py failing to start without the driver
library, the fallback to nvidia-smi, WSL's nvidia-smi, and FDL_NVML=0."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from fdl.compat import Capability
from fdl.system import gpus as module
from fdl.system.gpus import GpuReport, detect_gpus, read_nvml


class _Error(Exception):
    pass


def _fake_nvml(devices: list[dict[str, object]], *, init_fails: bool = False) -> types.ModuleType:
    """pynvml's calls fdl makes, answering from ``devices``."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = _Error  # type: ignore[attr-defined]
    nvml.NVML_DEVICE_MIG_ENABLE = 1  # type: ignore[attr-defined]
    calls: list[str] = []
    nvml.calls = calls  # type: ignore[attr-defined]

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise _Error("NVML Shared Library Not Found")

    def mig_mode(handle: dict[str, object]) -> tuple[int, int]:
        if "mig" not in handle:
            raise _Error("Not Supported")
        return (1, 1) if handle["mig"] else (0, 0)

    def mig_handle(handle: dict[str, object], slot: int) -> object:
        if slot >= int(handle.get("mig") or 0):
            raise _Error("Not Found")
        return object()

    nvml.nvmlInit = init  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    nvml.nvmlSystemGetDriverVersion = lambda: b"470.256.02"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: len(devices)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: devices[i]  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCudaComputeCapability = lambda h: h["cap"]  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = lambda h: h["name"]  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h["mem"])  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMigMode = mig_mode  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle  # type: ignore[attr-defined]
    return nvml


KEPLER = {"name": b"Tesla K80", "cap": (3, 7), "mem": 12 << 30}
A100 = {"name": "NVIDIA A100-SXM4-40GB", "cap": (8, 0), "mem": 40 << 30, "mig": 3}


def test_nvml_reads_capabilities_even_where_nvidia_smi_cannot() -> None:
    nvml = _fake_nvml([KEPLER, A100])
    report = read_nvml(lambda: nvml)
    assert report is not None and report.source == "nvml"
    assert [g.capability for g in report.gpus] == [Capability(3, 7), Capability(8, 0)]
    assert report.gpus[0].name == "Tesla K80" and report.gpus[0].memory_mib == 12 * 1024
    assert report.driver == "470.256.02"
    assert [g.mig_instances for g in report.gpus] == [0, 3]
    assert nvml.calls == ["init", "shutdown"]  # type: ignore[attr-defined]


def test_nvml_that_cannot_start_falls_back_to_nvidia_smi(tmp_path: Path) -> None:
    assert read_nvml(lambda: _fake_nvml([], init_fails=True)) is None
    assert read_nvml(lambda: None) is None  # the binding is not installed


def test_the_real_binding_without_a_driver_library_is_not_an_error() -> None:
    pytest.importorskip("pynvml")
    if Path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists():
        pytest.skip("this machine has NVIDIA's driver library")
    assert read_nvml() is None


class _Runner:
    """nvidia-smi that answers one GPU, where it is asked for."""

    def __init__(self, on_path: bool) -> None:
        self.on_path = on_path
        self.argv: list[list[str]] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if self.on_path else None

    def run(self, argv: list[str], **_: object) -> types.SimpleNamespace:
        self.argv.append(argv)
        line = "0, NVIDIA GeForce RTX 5060 Ti, 12.0, 16384, 570.86\n"
        return types.SimpleNamespace(returncode=0, stdout=line, stderr="")


def test_nvml_first_then_nvidia_smi_and_fdl_nvml_0() -> None:
    nvml_report = GpuReport((), None, "NVML lists no GPU", source="nvml")
    runner = _Runner(on_path=True)
    found = detect_gpus(runner, nvml=lambda: nvml_report, environ={})  # type: ignore[arg-type]
    assert found.source == "nvidia-smi" and found.capabilities == (Capability(12, 0),)
    listed = read_nvml(lambda: _fake_nvml([A100]))
    assert detect_gpus(runner, nvml=lambda: listed, environ={}) is listed  # type: ignore[arg-type]
    off = detect_gpus(runner, nvml=lambda: listed, environ={"FDL_NVML": "0"})  # type: ignore[arg-type]
    assert off.source == "nvidia-smi"


def test_wsl_nvidia_smi_is_found_off_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wsl = tmp_path / "nvidia-smi"
    monkeypatch.setattr(module, "WSL_NVIDIA_SMI", wsl)
    runner = _Runner(on_path=False)
    missing = detect_gpus(runner, environ={"FDL_NVML": "0"})  # type: ignore[arg-type]
    assert not missing.gpus and "not found" in (missing.reason or "")
    wsl.write_text("")
    found = detect_gpus(runner, environ={"FDL_NVML": "0"})  # type: ignore[arg-type]
    assert found.capabilities == (Capability(12, 0),)
    assert runner.argv[-1][0] == str(wsl)
