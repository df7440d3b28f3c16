"""Variants from the real PyPI torch wheels, verified by reading their binaries and by
building and running a C++ program with CMake's find_package(Torch).

- torch 2.13.0, the CPU view of PyPI's CUDA 13.0 wheel (install --from-wheel --cpu: ~127
  MiB read by range, kept in the tests' cache), then verify --cmake (g++, cmake) for real;
  once per session (the tree is ~460 MB).
- torch 2.14.1 cu130 with its NVIDIA libraries: test_libtorch_wheel_cuda.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cpu_view import artefact_missing, cpu_view_env, install_args

REPO = Path(__file__).resolve().parents[2]


def fdl(
    args: list[str], home: Path, timeout: float = 1800, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The fdl CLI in a subprocess (real runner, real pip, real cmake)."""
    # pip keeps its configuration (indexes, find-links): the machine's environment stays
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDL", "FLODL"))}
    env.update(
        FDL_HOME=str(home / "fdl"),
        FDL_CACHE_DIR=str(home / "cache"),
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
    )
    env.update(extra or {})
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


@pytest.fixture(scope="session")
def cpu_variant(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """(home, variant dir, install JSON): the CPU view of torch 2.13.0 as precompiled/cpu."""
    home = tmp_path_factory.mktemp("wheel-cpu")
    result = fdl([*install_args("2.13.0"), "--json"], home, extra=cpu_view_env())
    if result.returncode == 5:
        artefact_missing(f"PyPI cannot be read: {result.stderr[-400:]}")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    return home, Path(data["path"]), data


def test_cpu_view_variant(cpu_variant: tuple[Path, Path, dict]) -> None:
    home, path, installed = cpu_variant
    assert path == home / "fdl/libtorch/precompiled/cpu"
    assert (home / "fdl/libtorch/.active").read_text() == "precompiled/cpu\n"
    libraries = sorted(p.name for p in (path / "lib").iterdir())
    assert libraries == [
        "libc10.so",
        "libcudart.so.13",
        "libcupti.so.13",
        "libgomp.so.1",
        "libtorch.so",
        "libtorch_cpu.so",
    ]
    assert (path / "lib/libtorch.so").read_bytes().startswith(b"/* fdl: CPU view")
    assert (path / "share/cmake/Torch/TorchConfig.cmake").is_file()
    assert (path / "build-version").read_text() == "2.13.0+cu130\n"
    info = json.loads((path / "variant.json").read_text())
    source = info["source"]
    assert (source["kind"], source["view"], source["wheel_cuda"]) == ("wheel", "cpu", "13.0")
    assert len(source["wheel_sha256"]) == 64 and source["wheel"].endswith(".whl")
    assert (info["torch"], info["cuda"], info["abi"]) == ("2.13.0", None, "cxx11")
    assert info["archs_found"] == {"cubin": [], "ptx": []}
    view = info["extra"]["cpu_view"]
    assert "libtorch_cuda.so" in view["left_out"] and "libtorch_python.so" in view["left_out"]
    assert [n["libraries"] for n in view["nvidia_libraries"]] == [
        ["libcupti.so.13"],
        ["libcudart.so.13"],
    ]
    assert view["bytes_read"] + view["bytes_cached"] < view["wheel_size"] / 3
    assert "cuda=none" in (path / ".arch").read_text()
    assert installed["installed"] is True
    shown = fdl(["libtorch", "info"], home)
    assert "a CPU view of a CUDA 13.0 build" in shown.stdout, shown.stdout


def test_cpu_variant_builds_and_runs_a_cmake_program(cpu_variant: tuple[Path, Path, dict]) -> None:
    home, _, _ = cpu_variant
    result = fdl(["libtorch", "verify", "--cmake", "--json"], home)
    report = json.loads(result.stdout)
    assert result.returncode == 0, json.dumps(report["checks"], indent=1) + result.stderr
    assert report["smoke"]["ok"] is True
    assert "torch 2.13.0" in report["smoke"]["lines"]
    assert "cpu ok" in report["smoke"]["lines"]
    build = next(c for c in report["checks"] if c["name"] == "build")
    assert build["message"].startswith("a CPU view of a CUDA 13.0 build"), build
    # a successful smoke build cleans up after itself
    assert not (home / "cache/smoke/precompiled-cpu").exists()


def test_second_install_of_the_same_wheel_is_a_no_op(cpu_variant: tuple[Path, Path, dict]) -> None:
    home, path, _ = cpu_variant
    stamp = (path / "variant.json").stat().st_mtime_ns
    result = fdl([*install_args("2.13.0"), "--json"], home, extra=cpu_view_env())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["installed"] is False
    assert (path / "variant.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
@pytest.mark.network
def test_pip_download_route_installs_what_pip_fetched(tmp_path: Path) -> None:
    """Without --cpu, pip downloads PyPI's torch 2.13.0 wheel (a CUDA 13.0 build, 502 MB,
    kept in the tests' cache); --no-nvidia leaves its NVIDIA wheels out."""
    args = ["libtorch", "install", "--from-wheel", "--torch", "2.13.0", "--no-nvidia", "--json"]
    result = fdl(args, tmp_path, extra=cpu_view_env())
    if result.returncode == 5:
        artefact_missing(f"PyPI cannot be reached: {result.stderr[-400:]}")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["source"]["fetched_by"].startswith("pip download torch==2.13.0")
    assert data["source"]["build_version"] == "2.13.0+cu130"
    assert data["cuda"] == "13.0" and data["extra"]["nvidia_libraries"]["origin"] == "not bundled"
    assert (tmp_path / "fdl/libtorch/precompiled/cu130/lib/libtorch_cuda.so").is_file()
    shutil.rmtree(tmp_path / "fdl", ignore_errors=True)  # 1.6 GB
