"""Native source builds end to end, against the fake PyTorch tree (tests/fixtures/fake-pytorch).

A CPU build always; a CUDA build for archs the local nvcc accepts when nvcc is present. Each
result must be registered and active, carry its metadata, contain the requested archs in its
fatbins, and serve a program built with find_package(Torch).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fdl.binaries import read_device_code
from fdl.libtorch.variants import active_name, read_info
from fdl.paths import Context
from tests.support.artefacts import require_nvcc
from tests.support.build_helpers import build_and_run_consumer, copy_source, losses

pytestmark = pytest.mark.slow
NVCC = shutil.which("nvcc")


def _env(base: Path) -> dict[str, str]:
    return {
        "FDL_HOME": str(base / "home"),
        "FDL_CACHE_DIR": str(base / "cache"),
        "FAKE_TORCH_UNITS": "4",
    }


def _run(run_fdl, base: Path, *args: str) -> dict:
    result = run_fdl(["libtorch", "build", *args, "--json"], cwd=base, env=_env(base))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cpu_build_is_registered_activated_and_usable(run_fdl, tmp_path: Path) -> None:
    source = copy_source(tmp_path / "pytorch")
    result = _run(
        run_fdl,
        tmp_path,
        "--cpu",
        "--native",
        "--source",
        str(source),
        "--disk-gb",
        "1",
        "--no-flash-attention",
    )
    variant = Path(result["path"])
    context = Context(tmp_path / "home", False)
    assert result["variant"] == "builds/cpu" and active_name(context) == "builds/cpu"
    assert (variant / "lib" / "libtorch.so").is_file()
    assert (variant / "share" / "cmake" / "Torch" / "TorchConfig.cmake").is_file()
    info = read_info(variant, "builds/cpu")
    assert info.torch == "2.13.0" and info.cuda is None and info.source["kind"] == "build"
    assert info.extra["env"]["USE_CUDA"] == "0" and info.extra["duration_s"] > 0
    assert info.source["git_hash"]
    assert not list(variant.parent.glob(".staging-*"))
    output = build_and_run_consumer(variant, tmp_path)
    trained = losses(output)
    assert trained and trained[-1] < trained[0]


def test_cuda_build_contains_the_requested_archs(run_fdl, tmp_path: Path) -> None:
    require_nvcc()
    source = copy_source(tmp_path / "pytorch")
    result = _run(
        run_fdl,
        tmp_path,
        "--archs",
        "7.5;12.0",
        "--ptx",
        "--native",
        "--source",
        str(source),
        "--disk-gb",
        "1",
        "--no-flash-attention",
    )
    assert result["variant"] == "builds/sm75-sm120-ptx120"
    assert result["archs_found"] == ["sm_75", "sm_120", "compute_120"]
    variant = Path(result["path"])
    code = read_device_code(variant / "lib" / "libtorch_cuda.so")
    assert set(code.targets.codes()) == {"sm_75", "sm_120", "compute_120"}
    info = read_info(variant, result["variant"])
    assert info.archs_found["cubin"] == ["sm_75", "sm_120"]
    assert info.archs_found["ptx"] == ["compute_120"]
    assert info.archs_requested == ["sm_75", "sm_120", "compute_120"]
    assert info.cuda and info.extra["TORCH_CUDA_ARCH_LIST"] == "7.5;12.0+PTX"
    assert "-Xfatbin" not in info.extra["env"]["TORCH_NVCC_FLAGS"]  # PyTorch's CMake adds it
    assert all(entry.compressed for entry in code.entries if entry.kind == 2)
    output = build_and_run_consumer(variant, tmp_path)
    assert losses(output)
