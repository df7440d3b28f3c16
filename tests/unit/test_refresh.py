"""The refresh tool's parsers on output recorded from the real CUDA 12.8 nvcc wheel, and
its drift check against the tables; one `slow` test runs it against PyPI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fdl.refresh import Derived, drift, nvcc_wheel_requirement, parse_host_limits, parse_ptxas_archs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "refresh"


def test_ptxas_help_gives_the_cubin_targets() -> None:
    archs = parse_ptxas_archs((FIXTURES / "ptxas-12.8-help.txt").read_text())
    assert archs[:3] == ["50", "52", "53"] and "90a" in archs and "120a" in archs
    assert not [a for a in archs if a.startswith("compute") or a.startswith("lto")]
    assert parse_ptxas_archs("no such option here") == []


def test_host_config_gives_the_newest_compilers() -> None:
    limits = parse_host_limits((FIXTURES / "host_config-12.8.h").read_text())
    assert limits == {"gcc": 14, "clang": 19}
    assert parse_host_limits("#if __GNUC__ > 13\n#if (__clang_major__ > 17)\n") == {
        "gcc": 13,
        "clang": 17,
    }


def test_wheel_names_follow_nvidias_scheme() -> None:
    assert nvcc_wheel_requirement("12.8") == "nvidia-cuda-nvcc-cu12==12.8.*"
    assert nvcc_wheel_requirement("11.8") == "nvidia-cuda-nvcc-cu11==11.8.*"
    assert nvcc_wheel_requirement("13.0") == "nvidia-cuda-nvcc==13.0.*"


def test_drift_names_each_difference_with_its_source() -> None:
    archs = parse_ptxas_archs((FIXTURES / "ptxas-12.8-help.txt").read_text())
    same = Derived("12.8", "nvcc.whl", archs, {"gcc": 14, "clang": 19})
    assert drift(same) == []
    off = Derived("12.8", "nvcc.whl", [*archs, "130"], {"gcc": 15, "clang": 19})
    found = {d.fact: d for d in drift(off)}
    assert set(found) == {"archs", "compilers.gcc"}
    assert found["archs"].detail["missing_from_table"] == ["130"]
    assert found["compilers.gcc"].table == 14 and found["compilers.gcc"].artefact == 15
    assert "host_config.h of nvcc.whl" in found["compilers.gcc"].source


@pytest.mark.slow
def test_the_table_matches_the_real_wheel_of_cuda_12_8() -> None:
    """Downloads NVIDIA's nvcc wheel of CUDA 12.8 from PyPI (about 40 MB); fails on drift."""
    done = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "toolkits", "12.8"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if "cannot download" in done.stderr:
        pytest.skip(f"PyPI is not reachable: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "12.8 (nvidia_cuda_nvcc_cu12-12.8" in done.stdout and "matches the table" in done.stdout
