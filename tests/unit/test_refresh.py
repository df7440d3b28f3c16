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
    clang = "#if (__clang_major__ > 17)\n#error -- unsupported clang version! ...\n"
    assert parse_host_limits("#if __GNUC__ > 13\n" + clang) == {"gcc": 13, "clang": 17}


def test_the_generic_clang_check_counts_not_grace_or_hos_clang() -> None:
    """CUDA 13.4's header (nvidia-cuda-crt 13.4.92) checks Grace clang (<= 22), HOS clang
    (< 22) and clang (< 23): the limit for clang is 22, not the lowest of the three."""
    limits = parse_host_limits((FIXTURES / "host_config-13.4.h").read_text())
    assert limits == {"gcc": 16, "clang": 22}


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


def test_a_toolkit_newer_than_the_tables_is_one_drift_not_a_crash() -> None:
    [new] = drift(Derived("19.1", "nvcc.whl", ["75", "200"], {"gcc": 17, "clang": 24}))
    assert (new.fact, new.table) == ("toolkit", None)
    assert new.artefact == {"archs": "75 200", "compilers": {"gcc": 17, "clang": 24}}


@pytest.mark.slow
@pytest.mark.network
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


METADATA = """Metadata-Version: 2.4
Name: torch
Version: 2.15.0
Requires-Dist: filelock
Requires-Dist: cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"
Requires-Dist: nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"
Requires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == "Linux"
"""
OLD_STYLE = """Version: 2.4.1
Requires-Dist: nvidia-cuda-runtime-cu12 (==12.1.105) ; platform_system == "Linux"
Requires-Dist: nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux"
"""


def _wheel(path: Path, metadata: str, padding: int) -> Path:
    """A zip shaped like a wheel: big members first, METADATA near the end."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr("torch/lib/libtorch.so", b"\0" * padding)
        wheel.writestr("torch-2.15.0.dist-info/METADATA", metadata)
        wheel.writestr("torch-2.15.0.dist-info/RECORD", "")
    return path


def test_a_wheels_metadata_is_read_with_range_requests_only(tmp_path: Path) -> None:
    from fdl.net import read_range
    from fdl.refresh._wheels import cuda_facts, wheel_metadata

    wheel = _wheel(tmp_path / "torch.whl", METADATA, 3 << 20)
    asked: list[tuple[int, int | None]] = []

    def read(url: str, start: int, length: int | None) -> tuple[bytes, int]:
        asked.append((start, length))
        return read_range(url, start, length)

    text = wheel_metadata(wheel.as_uri(), read)
    facts = cuda_facts(text)
    assert (facts.version, facts.cuda, facts.cudnn) == ("2.15.0", "13.2", "9.26.0.51")
    assert all(length is not None and length < 1 << 17 for _, length in asked[1:])
    old = cuda_facts(OLD_STYLE)
    assert (old.cuda, old.cudnn) == ("12.1", "9.1.0.70")


def test_pins_for_another_machine_do_not_count() -> None:
    """Before 2.12 the aarch64 wheel's METADATA lists the CUDA pins for x86_64 only: on
    aarch64 pip installs none of them, so that wheel is a CPU build."""
    from fdl.refresh._wheels import cuda_facts

    marked = (
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n"
        'Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and '
        'platform_machine == "x86_64"\n'
        'Requires-Dist: nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and '
        'platform_machine == "x86_64"\n'
        "Requires-Dist: sympy>=1.13.3\n"
    )
    assert (cuda_facts(marked).cuda, cuda_facts(marked).cudnn) == ("12.8", "9.10.2.21")
    arm = cuda_facts(marked, "aarch64")
    assert (arm.cuda, arm.cudnn, arm.pins) == (None, None, {})
    assert cuda_facts(METADATA, "aarch64").cuda == "13.2"  # 2.15: pins for every machine


def test_wheel_drift_names_a_release_the_tables_lack(tmp_path: Path) -> None:
    from fdl.refresh._wheels import cuda_facts, wheel_drift

    [missing] = wheel_drift("2.99.0", "linux-x86_64", cuda_facts(METADATA))
    assert missing["fact"] == "release" and "CUDA 13.2" in str(missing["artefact"])
    known = cuda_facts(METADATA.replace("2.15.0", "2.14.1").replace("13.2.2", "13.0.2"))
    found = wheel_drift("2.14.1", "linux-x86_64", known)
    assert [d["fact"] for d in found] == ["default.cudnn"]  # the table has 9.24.0.43


@pytest.mark.network
def test_the_tables_match_every_releases_pypi_wheels() -> None:
    """Reads the METADATA of every known release's x86_64 and aarch64 wheels on PyPI
    (Range requests, a few KiB each); fails on any drift from pytorch.yaml."""
    from fdl.compat import releases

    versions = [r.latest for r in releases()]
    done = subprocess.run(
        [sys.executable, "-m", "fdl.refresh", "wheels", "--metadata-only", *versions],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for version in versions:
        assert f"{version} linux-x86_64:" in done.stdout
        assert f"{version} linux-aarch64:" in done.stdout
