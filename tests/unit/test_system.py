"""Machine probes: GPUs through nvidia-smi, build tools, resources. Never raise for a missing tool."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fdl.compat import Capability, choose_variant
from fdl.runner import Completed, SubprocessRunner
from fdl.system import (
    cpu,
    detect_gpus,
    disk_free,
    memory,
    parse_gpu_csv,
    probe_nvcc,
    probe_tool,
    probe_toolchain,
)
from tests.support.artefacts import skip_or_fail
from tests.support.fakes import FakeRunner

RIG = "0, NVIDIA GeForce RTX 5060 Ti, 12.0, 16311, 576.88\n1, NVIDIA GeForce GTX 1060 6GB, 6.1, 6144, 576.88\n"
QUERY = "--query-gpu=index,name,compute_cap,memory.total,driver_version"


def _fake_program(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


def test_fake_nvidia_smi_on_path(fake_bin: Path) -> None:
    _fake_program(
        fake_bin,
        "nvidia-smi",
        f'[ "$1" = "{QUERY}" ] && [ "$2" = "--format=csv,noheader,nounits" ] || exit 2\nprintf "{RIG}"\n',
    )
    report = detect_gpus(SubprocessRunner())
    assert report.reason is None
    assert [(g.index, g.short_name, g.sm, g.memory_mib) for g in report.gpus] == [
        (0, "RTX 5060 Ti", "sm_120", 16311),
        (1, "GTX 1060 6GB", "sm_61", 6144),
    ]
    assert report.driver == "576.88"
    assert report.capabilities == (Capability(6, 1), Capability(12, 0))
    assert not choose_variant(report.capabilities).ok


def test_failing_nvidia_smi_keeps_the_reason(fake_bin: Path) -> None:
    _fake_program(
        fake_bin,
        "nvidia-smi",
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n',
    )
    report = detect_gpus(SubprocessRunner())
    assert report.gpus == ()
    assert "status 9" in (report.reason or "") and "communicate" in (report.reason or "")


def test_no_nvidia_smi() -> None:
    report = detect_gpus(FakeRunner())
    assert report.gpus == () and "nvidia-smi not found" in (report.reason or "")


def test_gpus_through_fake_runner() -> None:
    runner = FakeRunner(
        {("nvidia-smi",): Completed([], 0, RIG)}, programs={"nvidia-smi": "/usr/bin/nvidia-smi"}
    )
    report = detect_gpus(runner)
    assert [g.capability for g in report.gpus] == [Capability(12, 0), Capability(6, 1)]


def test_csv_oddities() -> None:
    gpus, bad = parse_gpu_csv(
        "0, NVIDIA A100-SXM4-80GB, 8.0, 81920, 550.54.15\n"
        "1, Weird, Name, With Commas, 9.0, 81559, 550.54.15\n"
        "2, Old Card, [N/A], [N/A], 470.1\n"
        "garbage line\n"
    )
    assert [g.name for g in gpus] == [
        "NVIDIA A100-SXM4-80GB",
        "Weird, Name, With Commas",
        "Old Card",
    ]
    assert gpus[1].capability == Capability(9, 0)
    assert gpus[2].capability is None and gpus[2].memory_mib is None
    assert bad == ["garbage line"]


NVCC_128 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.8, V12.8.93\n"


def test_toolchain_with_fake_runner() -> None:
    runner = FakeRunner(
        {
            ("nvcc", "--version"): Completed([], 0, NVCC_128),
            ("nvcc", "--list-gpu-code"): Completed(
                [], 0, "sm_50\nsm_61\nsm_90\nsm_100\nsm_101\nsm_120\n"
            ),
            ("gcc", "--version"): Completed([], 0, "gcc (GCC) 14.2.1 20250110\nCopyright\n"),
            ("g++", "--version"): Completed([], 0, "g++ (Debian 12.2.0-14) 12.2.0\n"),
            ("cmake", "--version"): Completed([], 0, "cmake version 4.1.2\n"),
            ("python3", "--version"): Completed([], 0, "Python 3.12.3\n"),
            ("ninja", "--version"): Completed([], 0, "1.12.1\n"),
            ("docker", "--version"): Completed([], 0, "Docker version 28.2.2, build e6534b4\n"),
            ("docker", "version"): Completed(
                [], 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock"
            ),
        },
        programs={
            n: f"/usr/bin/{n}"
            for n in ("nvcc", "gcc", "g++", "cmake", "python3", "ninja", "docker")
        },
    )
    chain = probe_toolchain(runner, cuda_home=Path("/nonexistent"))
    nvcc = chain.nvcc.value
    assert nvcc is not None and (nvcc.version, nvcc.full_version) == ("12.8", "12.8.93")
    assert "sm_61" in nvcc.targets.codes() and "sm_120a" in nvcc.targets.codes()
    assert chain["gcc"].value is not None and chain["gcc"].value.version == "14.2.1"
    assert chain["gcc"].value.major == 14
    assert chain["g++"].value is not None and chain["g++"].value.version == "12.2.0"
    assert chain["cmake"].value is not None and chain["cmake"].value.version == "4.1.2"
    assert chain["clang"].reason == "clang not found on PATH"
    assert chain["git"].value is None
    docker = chain.docker.value
    assert docker is not None and docker.cli_version == "28.2.2" and not docker.daemon
    assert "Cannot connect" in (docker.reason or "")


def test_nvcc_archs_fall_back_to_the_table() -> None:
    runner = FakeRunner(
        {
            ("nvcc", "--version"): Completed([], 0, NVCC_128),
            ("nvcc", "--list-gpu-code"): Completed([], 1, "", "nvcc fatal: Unknown option"),
        },
        programs={"nvcc": "/opt/cuda/bin/nvcc"},
    )
    nvcc = probe_nvcc(runner).value
    assert nvcc is not None and "table" in nvcc.targets_source
    assert "sm_120" in nvcc.targets.codes()


def test_missing_and_broken_tools_are_answers() -> None:
    assert probe_nvcc(FakeRunner(), cuda_home=Path("/nonexistent")).reason is not None
    broken = FakeRunner(
        {("cmake", "--version"): Completed([], 127, "", "cmake: bad interpreter")},
        programs={"cmake": "/x/cmake"},
    )
    probe = probe_tool("cmake", broken)
    assert probe.value is None and "status 127" in (probe.reason or "") and probe.path == "/x/cmake"
    odd = FakeRunner(
        {("git", "--version"): Completed([], 0, "no digits here")}, programs={"git": "/x/git"}
    )
    assert "cannot read a version" in (probe_tool("git", odd).reason or "")


def test_real_nvcc_probe() -> None:
    probe = probe_nvcc()
    if probe.value is None:
        skip_or_fail(f"{probe.reason or 'no nvcc'} (bash scripts/setup-machine.sh installs it)")
    assert probe.value.targets  # whatever it is, it lists archs


def test_resources(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       16314412 kB\nMemFree:  1000 kB\nMemAvailable:   8157206 kB\n"
    )
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text("4294967296\n")
    mem = memory(meminfo, cgroup).value
    assert mem is not None and (mem.total_mib, mem.available_mib, mem.limit_mib) == (
        15932,
        7966,
        4096,
    )
    assert mem.usable_mib == 4096
    (cgroup / "memory.max").write_text("max\n")
    assert memory(meminfo, cgroup).value.limit_mib is None  # type: ignore[union-attr]
    assert memory(tmp_path / "missing").reason is not None
    free = disk_free(tmp_path / "not" / "yet" / "there")
    assert free.value is not None and free.value > 0 and free.path == str(tmp_path)
    cores = cpu().value
    assert cores is not None and 1 <= cores.usable <= cores.logical
