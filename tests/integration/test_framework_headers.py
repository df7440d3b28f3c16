"""Our own C++ program, compiled against the headers of the libtorch release the project's
framework needs, with the C++ standard that framework compiles with: what fdl chooses
builds, and what it refuses does not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fdl.errors import NetworkError
from fdl.libtorch import framework_torch
from tests.support.artefacts import cached_dir, skip_or_fail
from tests.support.cpu_view import artefact_missing, cpu_view_env, install_args
from tests.support.wheel_headers import extract_remote, pypi_wheel_url

pytestmark = pytest.mark.slow

PROGRAM = Path(__file__).resolve().parent.parent / "fixtures" / "framework" / "train.cpp"
CMAKE = "cmake_minimum_required(VERSION 3.18)\nproject(demo CXX)\nset(CMAKE_CXX_STANDARD 17)\n"


def _gxx() -> str:
    found = shutil.which("g++")
    if found is None:
        pytest.skip("no g++ on PATH")
    return found


def _compile(tree: Path, std: int, out: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Compile (and link, with ``out``) the program against ``tree`` with ``-std=c++NN``."""
    argv = [
        _gxx(),
        f"-std=c++{std}",
        "-w",
        f"-I{tree / 'include'}",
        f"-I{tree / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
        str(PROGRAM),
    ]
    if out is None:
        argv.append("-fsyntax-only")
    else:
        lib = tree / "lib"
        argv += [f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltorch", "-ltorch_cpu", "-lc10", "-o", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def test_the_chosen_release_compiles_with_the_frameworks_standard(tmp_path: Path, run_fdl) -> None:
    """A C++ project asking for torch 2.13 exactly, in C++17: fdl installs 2.13.0 (the CPU
    view of PyPI's wheel), and the program builds against the headers it installed, links
    -ltorch (the view's linker script) and runs."""
    project = tmp_path / "demo"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(CMAKE + "find_package(Torch 2.13 EXACT REQUIRED)\n")
    (project / "fdl.yml").write_text("libtorch: {}\n")
    (pin,) = framework_torch(None, project).pins
    assert (pin.torch, pin.cxx_standard) == ("2.13.0", 17)
    env = cpu_view_env(tmp_path / "home")
    done = run_fdl(install_args("2.13.0"), cwd=project, env=env)
    if done.exit_code == 5:
        artefact_missing(f"PyPI cannot be read: {done.stderr[-400:]}")
    assert done.exit_code == 0, done.output
    variant = project / "libtorch" / "precompiled" / "cpu"
    built = _compile(variant, pin.cxx_standard, tmp_path / "train")
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "train")], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.startswith("torch 2.13 loss ")


@pytest.mark.network
def test_cxx17_against_headers_that_need_cxx20_fails_as_fdl_says(tmp_path: Path) -> None:
    """The fact behind the refusal: from 2.14 libtorch's headers stop a C++17 compile at
    the first include, so a C++17 project is never given them (the headers of 2.14.1, read
    from PyPI's aarch64 wheel member by member once, then from the tests' cache)."""
    project = tmp_path / "demo"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(CMAKE + "find_package(Torch 2.10 REQUIRED)\n")
    decision = framework_torch(None, project)
    assert "headers require C++20" in (decision.refusal("2.14.1") or "")
    assert decision.torch is not None and decision.torch.startswith("2.13.")
    try:
        tree = cached_dir(
            "headers/torch-2.14.1", lambda dest: extract_remote(pypi_wheel_url("2.14.1"), dest)
        )
    except (OSError, NetworkError) as exc:
        skip_or_fail(f"the headers of torch 2.14.1 cannot be read from PyPI: {exc}")
    refused = _compile(tree, 17)
    assert refused.returncode != 0
    assert "C++20 or later compatible compiler is required" in refused.stderr
    assert _compile(tree, 20).returncode == 0


@pytest.mark.network
def test_flodl_053_gets_headers_its_cxx17_shim_compiles_with(tmp_path: Path) -> None:
    """floDl 0.5.3 -> torch 2.10.0, C++17: the headers of 2.10.0 (read from PyPI's small
    aarch64 wheel, member by member) take our program in C++17."""
    project = tmp_path / "model"
    project.mkdir()
    (project / "Cargo.toml").write_text(
        '[package]\nname = "model"\nversion = "0.1.0"\n\n[dependencies]\nflodl = "0.5.3"\n'
    )
    (pin,) = framework_torch(None, project).pins
    assert (pin.torch, pin.cxx_standard) == ("2.10.0", 17)
    try:
        url = pypi_wheel_url(pin.torch)
        tree = extract_remote(url, tmp_path / "headers")
    except (OSError, NetworkError) as exc:
        pytest.skip(f"PyPI cannot be reached: {exc}")
    built = _compile(tree, pin.cxx_standard)
    assert built.returncode == 0, built.stderr[-3000:]
