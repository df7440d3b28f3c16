"""A CUDA variant from the real torch 2.14.1 cu130 wheel (PyPI, through the tests' artefact
cache: ``tests/support/artefacts.py``), verified by reading its binaries and by building a
C++ program with CMake's find_package(Torch) against CUDA 13.0's nvcc of
``scripts/setup-machine.sh``.

``fdl libtorch install --from-wheel`` brings the NVIDIA libraries with its own ``pip
download`` from the configured index, into the fdl cache kept in the tests' cache
(``<cache>/fdl``, as tests/support/cpu_view.py's installs; a second run downloads none of
them again); libtorch_cuda.so holds cubins for sm_75, 80, 86, 90,
100 and 120 and no PTX.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.system import probe_nvcc
from tests.support.artefacts import cache_dir, pypi_wheel, skip_or_fail

REPO = Path(__file__).resolve().parents[2]


def fdl(args: list[str], home: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """The fdl CLI in a subprocess (real runner, real pip, real cmake); fdl's cache is the
    one in the tests' cache, so the NVIDIA wheels pip fetches are there for the next run."""
    # pip keeps its configuration (indexes, find-links): the machine's environment stays
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDL", "FLODL"))}
    env.update(
        FDL_HOME=str(home / "fdl"),
        FDL_CACHE_DIR=str(cache_dir() / "fdl"),
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


@pytest.mark.slow
@pytest.mark.network
def test_cuda_wheel_variant_lists_its_real_archs(tmp_path: Path) -> None:
    wheel = pypi_wheel("torch==2.14.1")
    result = fdl(["libtorch", "install", "--from-wheel", str(wheel), "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    installed = json.loads(result.stdout)
    assert installed["variant"] == "precompiled/cu130"
    bundled = installed["extra"]["nvidia_libraries"]["packages"]
    assert any(p["from"].startswith("nvidia_cudnn") for p in bundled)
    verify = fdl(["libtorch", "verify", "--json"], tmp_path)
    report = json.loads(verify.stdout)
    assert verify.returncode == 0, json.dumps(report["checks"], indent=1)
    assert report["archs_found"]["cubin"] == [
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_90",
        "sm_100",
        "sm_120",
    ]
    assert report["archs_found"]["ptx"] == []
    main = next(lib for lib in report["libraries"] if lib["library"] == "libtorch_cuda.so")
    assert main["summary"].endswith("; no PTX")
    dependencies = next(c for c in report["checks"] if c["name"] == "dependencies")
    assert dependencies["severity"] == "ok", dependencies
    lib = tmp_path / "fdl/libtorch/precompiled/cu130/lib"
    for soname in ("libcudart.so.13", "libcublasLt.so.13", "libcudnn.so.9", "libnccl.so.2"):
        assert (lib / soname).is_file(), soname
    try:
        # PyTorch's CMake config of a CUDA build needs a toolkit at configure time
        if probe_nvcc().value is None or not Path("/usr/local/cuda/bin/nvcc").exists():
            skip_or_fail("no CUDA toolkit in /usr/local/cuda (bash scripts/setup-machine.sh)")
        if shutil.which("cmake") is None:
            skip_or_fail("no cmake on PATH (bash scripts/setup-machine.sh installs it)")
        smoke = fdl(["libtorch", "verify", "--cmake", "--json"], tmp_path)
        data = json.loads(smoke.stdout)
        assert data["smoke"]["ok"] is True, data["smoke"]
    finally:
        shutil.rmtree(tmp_path / "fdl", ignore_errors=True)  # 4 GB
        shutil.rmtree(cache_dir() / "fdl" / "smoke", ignore_errors=True)
