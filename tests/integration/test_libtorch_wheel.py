"""Variants from the real PyTorch wheels on this machine, verified by reading their binaries
and by building and running a C++ program with CMake's find_package(Torch).

- torch 2.13.0 CPU (/opt/wheels): install --from-wheel, then verify --cmake (C++20, g++,
  cmake) for real; once per session (the tree is ~480 MB).
- torch 2.14.1 cu130 (/opt/pypi-more, slow): install --from-wheel with its NVIDIA libraries
  fetched by pip from the configured index; libtorch_cuda.so holds cubins for sm_75, 80, 86,
  90, 100 and 120 and no PTX.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
REPO = Path(__file__).resolve().parents[2]


def fdl(args: list[str], home: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """The fdl CLI in a subprocess (real runner, real pip, real cmake)."""
    # pip keeps its configuration (indexes, find-links): the machine's environment stays
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDL", "FLODL"))}
    env.update(
        FDL_HOME=str(home / "fdl"),
        FDL_CACHE_DIR=str(home / "cache"),
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
    )
    work = home / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "fdl", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def need(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")


@pytest.fixture(scope="session")
def cpu_variant(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(home, variant dir) with the 2.13.0 CPU wheel installed as precompiled/cpu."""
    need(CPU_WHEEL)
    home = tmp_path_factory.mktemp("wheel-cpu")
    result = fdl(["libtorch", "install", "--from-wheel", str(CPU_WHEEL), "--json"], home)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    return home, Path(data["path"])


def test_cpu_wheel_variant(cpu_variant: tuple[Path, Path]) -> None:
    home, path = cpu_variant
    assert path == home / "fdl/libtorch/precompiled/cpu"
    assert (home / "fdl/libtorch/.active").read_text() == "precompiled/cpu\n"
    assert (path / "lib/libtorch_cpu.so").is_file()
    assert not (path / "lib/libtorch_python.so").exists()
    assert (path / "share/cmake/Torch/TorchConfig.cmake").is_file()
    assert (path / "build-version").read_text() == "2.13.0+cpu\n"
    info = json.loads((path / "variant.json").read_text())
    digest = hashlib.sha256(CPU_WHEEL.read_bytes()).hexdigest()
    assert info["source"]["sha256"] == digest and info["source"]["kind"] == "wheel"
    assert (info["torch"], info["cuda"], info["abi"]) == ("2.13.0", None, "cxx11")
    assert info["archs_found"] == {"cubin": [], "ptx": []}
    assert "cuda=none" in (path / ".arch").read_text()


def test_cpu_variant_builds_and_runs_a_cmake_program(cpu_variant: tuple[Path, Path]) -> None:
    if shutil.which("cmake") is None or shutil.which("g++") is None:
        pytest.skip("cmake and g++ are needed")
    home, _ = cpu_variant
    result = fdl(["libtorch", "verify", "--cmake", "--json"], home)
    report = json.loads(result.stdout)
    assert result.returncode == 0, json.dumps(report["checks"], indent=1) + result.stderr
    assert report["smoke"]["ok"] is True
    assert "torch 2.13.0" in report["smoke"]["lines"]
    assert "cpu ok" in report["smoke"]["lines"]
    # a successful smoke build cleans up after itself
    assert not (home / "cache/smoke/precompiled-cpu").exists()


def test_second_install_of_the_same_wheel_is_a_no_op(cpu_variant: tuple[Path, Path]) -> None:
    home, path = cpu_variant
    stamp = (path / "variant.json").stat().st_mtime_ns
    result = fdl(["libtorch", "install", "--from-wheel", str(CPU_WHEEL), "--json"], home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["installed"] is False
    assert (path / "variant.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
@pytest.mark.network
def test_pip_download_route(tmp_path: Path) -> None:
    need(CPU_WHEEL)  # pip resolves torch==2.13.0 to it through the configured find-links
    result = fdl(["libtorch", "install", "--from-wheel", "--torch", "2.13.0", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["source"]["fetched_by"].startswith("pip download torch==2.13.0")
    assert data["source"]["build_version"] == "2.13.0+cpu"
