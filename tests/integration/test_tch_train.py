"""tch-rs and libtorch C++ for real, against the libtorch fdl installs (issue 33, part 2).

A Cargo project on ``tch = "=0.23.0"`` (``tests/fixtures/tch-train``) is built by
``fdl build`` and run by ``fdl train`` against the CPU view of torch 2.10.0 (the release
torch-sys 0.23.0 checks ``$LIBTORCH/build-version`` for; no
``LIBTORCH_BYPASS_VERSION_CHECK`` anywhere): a tensor operation and one SGD step, read
as numbers. Against 2.13.0 torch-sys stops with its own message when cargo runs it, and
``fdl build`` stops before cargo starts. A CMake project asking for
``find_package(Torch 2.10 EXACT)`` builds and trains against the same 2.10.0 variant.

Cost, measured on 2 cores shared with other builds (load ~11): cold about 17 min (the
tch-rs build 8.5 min, 5 of them torch-sys's libtch C++, ~21k lines over libtorch's
headers, at the dev profile's -O0, where -O3 took 14; the 2.13.0 target directory 6 min,
its build-dependencies compile before torch-sys refuses; the C++ program 1-2.5 min). Warm about 13 s: cargo's registry (``CARGO_HOME``) and target
directories, the tch-rs project and the C++ project with its build directory stay in
``$FDL_TEST_CACHE/cargo/`` at stable paths (torch-sys's build script reruns when
``$LIBTORCH`` changes), so nothing compiles again. The CPU views (2.10.0, 2.13.0) come
from PyPI through ``tests/support/cpu_view``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.locking import FileLock
from tests.support.artefacts import cache_dir, skip_or_fail
from tests.support.cpu_view import install_cpu_view
from tests.support.images import link_variant

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "tch-train"
CPP_PROGRAM = REPO / "tests" / "fixtures" / "cpp-train" / "src" / "main.cpp"
TCH, TORCH, OTHER = "0.23.0", "2.10.0", "2.13.0"
BUILD_TIMEOUT = 2400  # a cold torch-sys on two busy cores
NUMBER = r"([-+0-9.eE]+|NaN|nan|inf)"


def _cargo() -> Path:
    """cargo on PATH, else rustup's (``$CARGO_HOME/bin``, ``~/.cargo/bin``)."""
    found = shutil.which("cargo")
    for candidate in (found, Path.home() / ".cargo" / "bin" / "cargo"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    skip_or_fail("cargo is not installed (rustup, or the machine set-up, installs it)")


def _cargo_dirs(key: str) -> tuple[Path, Path]:
    """``CARGO_HOME`` (the registry, shared) and the target directory of ``key``."""
    root = cache_dir() / "cargo"
    return root / "home", root / key / "target"


def _sync(source: Path, dest: Path) -> None:
    """Copy ``source``'s files into ``dest``, writing only those that differ (cargo
    compares modification times: an unchanged file keeps its own)."""
    for path in sorted(source.rglob("*")):
        if path.is_file():
            target = dest / path.relative_to(source)
            data = path.read_bytes()
            if not target.is_file() or target.read_bytes() != data:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)


def _environ(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without fdl's or libtorch's settings (no
    ``LIBTORCH_BYPASS_VERSION_CHECK`` can slip in), cargo on PATH, plus ``extra``."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FDL", "LIBTORCH", "CARGO", "CMAKE_", "Torch_"))
    }
    environ["PATH"] = f"{_cargo().parent}{os.pathsep}{environ.get('PATH', '')}"
    environ.update(PYTHONPATH=str(REPO), NO_COLOR="1", FDL_IN_CONTAINER="0", **extra)
    return environ


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600):
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _fdl(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600):
    return _run([sys.executable, "-m", "fdl", *args], cwd, env, timeout)


def _link_or_copy(variant: Path, project: Path) -> Path:
    """The variant as the project's active ``precompiled/cpu``: hard links, or a copy
    where the tests' cache is on another file system."""
    try:
        return link_variant(variant, project)
    except OSError:
        shutil.rmtree(project / "libtorch", ignore_errors=True)
        shutil.copytree(variant, project / "libtorch" / "precompiled" / "cpu")
        (project / "libtorch" / ".active").write_text("precompiled/cpu\n", encoding="utf-8")
        return project / "libtorch" / "precompiled" / "cpu"


@pytest.fixture(scope="module")
def tch_project() -> Iterator[tuple[Path, dict[str, str]]]:
    """The fixture project at its stable path in the tests' cache, with the CPU view of
    torch 2.10.0 installed by fdl into its ``libtorch/``; and the environment of its
    cargo (the cached registry and target directory)."""
    key = f"tch-{TCH}-torch-{TORCH}"
    home, target = _cargo_dirs(key)
    project = target.parent / "project"
    project.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / ".lock", purpose="the tch-rs test project"):
        _sync(FIXTURE, project)
        install_cpu_view(project, torch=TORCH)
        yield project, _environ({"CARGO_HOME": str(home), "CARGO_TARGET_DIR": str(target)})


def test_tch_builds_through_fdl_and_trains(tch_project: tuple[Path, dict[str, str]]) -> None:
    project, env = tch_project
    build = _fdl(["build"], project, env, timeout=BUILD_TIMEOUT)
    assert build.returncode == 0, build.stderr[-4000:]
    assert "BYPASS" not in build.stdout + build.stderr
    train = _fdl(["train"], project, env)
    assert train.returncode == 0, train.stderr[-4000:]
    # the same environment as the build: cargo has nothing to compile again
    assert "Finished" in train.stderr and "Compiling" not in train.stderr, train.stderr[-2000:]
    out = train.stdout
    total = re.search(rf"^tensor sum {NUMBER}$", out, re.M)
    grad = re.search(rf"^grad norm {NUMBER}$", out, re.M)
    losses = re.search(rf"^loss before {NUMBER} after {NUMBER}$", out, re.M)
    assert total and grad and losses, out
    assert float(total.group(1)) == 12.0  # (1 + 2 + 3) * 2
    assert float(grad.group(1)) > 0.0
    before, after = float(losses.group(1)), float(losses.group(2))
    assert 0.0 < after < before, (before, after)


@pytest.fixture(scope="module")
def other_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU view of torch 2.13.0, installed where no framework pins a release."""
    seed = tmp_path_factory.mktemp("other-release")
    (seed / "fdl.yml").write_text("description: holds torch 2.13.0\n", encoding="utf-8")
    return install_cpu_view(seed, torch=OTHER)


def test_another_release_fails_in_torch_sys_and_fdl_stops_first(
    tmp_path: Path, other_release: Path
) -> None:
    project = tmp_path / "tch-train"
    _sync(FIXTURE, project)
    variant = _link_or_copy(other_release, project)
    # its own target directory: a build script run with another $LIBTORCH would make the
    # cached 2.10.0 build compile torch-sys again
    home, target = _cargo_dirs(f"tch-{TCH}-torch-{OTHER}")
    env = _environ({"CARGO_HOME": str(home), "CARGO_TARGET_DIR": str(target)})
    direct = _run(
        [str(_cargo()), "build", "--release", "--locked"],
        project,
        {**env, "LIBTORCH": str(variant), "LD_LIBRARY_PATH": f"{variant}/lib"},
        timeout=BUILD_TIMEOUT,
    )
    assert direct.returncode != 0
    assert f"this tch version expects PyTorch {TORCH}, got {OTHER}" in direct.stderr

    shim = tmp_path / "bin"  # a cargo that leaves a mark, then runs the real one
    shim.mkdir()
    mark = tmp_path / "cargo-started"
    (shim / "cargo").write_text(f'#!/bin/sh\ntouch {mark}\nexec {_cargo()} "$@"\n')
    (shim / "cargo").chmod(0o755)
    refused = _fdl(["build"], project, {**env, "PATH": f"{shim}{os.pathsep}{env['PATH']}"})
    assert refused.returncode == 4, refused.stderr[-3000:]
    assert not mark.exists()
    assert (
        f"the active libtorch precompiled/cpu is torch {OTHER}: tch-rs {TCH} compiles "
        f"against torch {TORCH} only (Cargo.lock:"
    ) in refused.stderr
    assert f"fdl libtorch install --from-wheel --cpu --torch {TORCH}" in refused.stderr


CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(train LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
find_package(Torch {version} EXACT REQUIRED)
add_executable(train src/main.cpp)
target_link_libraries(train PRIVATE "${{TORCH_LIBRARIES}}")
"""

CPP_MANIFEST = """\
description: find_package(Torch 2.10 EXACT), built and trained through fdl
libtorch: {}
commands:
  build:
    run: cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build
  train:
    run: ./build/train
"""

LOSS = re.compile(rf"^step (\d+) loss {NUMBER}$", re.M)


def test_cpp_find_package_exact_builds_and_trains(
    tmp_path: Path, tch_project: tuple[Path, dict[str, str]]
) -> None:
    """The same 2.10.0 variant: CMake finds it for ``Torch 2.10 EXACT`` (the wheel's
    TorchConfigVersion.cmake under fdl's TorchConfig.cmake), the program trains; asked
    for 2.13 EXACT, CMake itself refuses the variant. The project and its build
    directory stay in the tests' cache beside the tch-rs project, whose ``libtorch/`` it
    shares through a link: a second run compiles nothing."""
    libtorch, env = tch_project[0] / "libtorch", tch_project[1]
    source = tmp_path / "cpp"
    (source / "src").mkdir(parents=True)
    shutil.copyfile(CPP_PROGRAM, source / "src" / "main.cpp")
    (source / "CMakeLists.txt").write_text(CMAKE.format(version="2.10"), encoding="utf-8")
    (source / "fdl.yml").write_text(CPP_MANIFEST, encoding="utf-8")
    project = tch_project[0].parent / "cpp-exact"
    _sync(source, project)
    if not (project / "libtorch").is_symlink():
        (project / "libtorch").symlink_to(libtorch, target_is_directory=True)
    build = _fdl(["build"], project, env, timeout=BUILD_TIMEOUT)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    train = _fdl(["train", "--", "--steps", "30"], project, env)
    assert train.returncode == 0, train.stderr[-3000:]
    losses = [float(value) for _, value in LOSS.findall(train.stdout)]
    assert len(losses) == 30, train.stdout[-2000:]
    assert losses[-1] < 0.5 * losses[0], losses

    (source / "CMakeLists.txt").write_text(CMAKE.format(version="2.13"), encoding="utf-8")
    refused = _run(
        ["cmake", "-S", ".", "-B", "build-2.13", f"-DCMAKE_PREFIX_PATH={libtorch}/precompiled/cpu"],
        source,
        env,
        timeout=300,
    )
    assert refused.returncode != 0
    said = " ".join(refused.stderr.split())  # CMake wraps its message
    assert 'exactly matches requested version "2.13"' in said, refused.stderr[-2000:]
    assert "TorchConfig.cmake, version: 2.10.0" in said
