"""GPU detection that does not miss GPUs: real `nvidia-smi` stand-ins on PATH, as drivers of
each age answer (issue 13)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.compat import Capability, capability_from_name
from fdl.runner import SubprocessRunner
from fdl.system import detect_gpus

# R470 (the last driver for Kepler): no compute_cap field; nvidia-smi says so and exits 2.
R470 = """#!/bin/sh
case "$*" in
  *compute_cap*)
    echo 'Field "compute_cap" is not a valid field to query.' >&2
    echo '' >&2
    echo 'Run nvidia-smi --help-query-gpu for more information.' >&2
    exit 2 ;;
  *)
    printf '0, Tesla K80, 11441, 470.256.02\\n1, NVIDIA GeForce GTX 1080 Ti, 11178, 470.256.02\\n' ;;
esac
"""
UNKNOWN_NAME = R470.replace("Tesla K80", "Mystery Accelerator 9000")


def _fake(tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    program = folder / "nvidia-smi"
    program.write_text(script)
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_a_driver_without_compute_cap_still_lists_its_gpus(tmp_path, monkeypatch) -> None:
    _fake(tmp_path, R470, monkeypatch)
    report = detect_gpus(SubprocessRunner())
    assert [g.capability for g in report.gpus] == [Capability(3, 7), Capability(6, 1)]
    assert report.driver == "470.256.02"
    assert report.capabilities == (Capability(3, 7), Capability(6, 1))
    assert report.reason is not None and "taken from the GPU names" in report.reason


def test_a_gpu_the_table_does_not_know_is_reported_not_hidden(tmp_path, monkeypatch) -> None:
    _fake(tmp_path, UNKNOWN_NAME, monkeypatch)
    report = detect_gpus(SubprocessRunner())
    assert len(report.gpus) == 2  # not "CPU only"
    assert report.gpus[0].capability is None and report.gpus[1].capability == Capability(6, 1)
    assert report.reason is not None and "Mystery Accelerator 9000" in report.reason
    assert "--archs" in report.reason


def test_diagnose_names_the_gpus_of_an_old_driver(run_fdl, tmp_path, monkeypatch) -> None:
    _fake(tmp_path, R470, monkeypatch)
    result = run_fdl(
        ["diagnose", "--no-docker"], cwd=tmp_path, env={"FDL_HOME": str(tmp_path / "home")}
    )
    assert "Tesla K80: sm_37" in result.stdout or "Tesla K80: 3.7" in result.stdout
    assert "CPU only" not in result.stdout


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("Tesla K40m", "3.5"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA GeForce RTX 3060 Ti", "8.6"),
        ("NVIDIA GeForce RTX 5060 Ti", "12.0"),
        ("Tesla V100-PCIE-16GB", "7.0"),
        ("NVIDIA GB10", "12.1"),
        ("Quadro K1200", "5.0"),
    ],
)
def test_names_map_to_capabilities(name: str, capability: str) -> None:
    major, minor = capability.split(".")
    assert capability_from_name(name) == Capability(int(major), int(minor))
