"""The offload-bundle reader against real code objects: Debian's hipcc (ROCm 5.2, clang 15)
compiles a HIP kernel for several gfx targets, and fdl lists what clang-offload-bundler
lists (scripts/setup-machine.sh installs hipcc; CI fails rather than skips without it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fdl.binaries.offload import read_offload_code

KERNEL = """\
#include <hip/hip_runtime.h>
__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
extern "C" void launch(float a, const float* x, float* y, int n) {
  hipLaunchKernelGGL(axpy, dim3((n + 255) / 256), dim3(256), 0, 0, a, x, y, n);
}
"""


def _tool(name: str, *more: str) -> str:
    found = shutil.which(name) or next((p for p in more if Path(p).is_file()), None)
    if found:
        return found
    if os.environ.get("FDL_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{name} is required in CI (scripts/setup-machine.sh installs hipcc)")
    pytest.skip(f"no {name} (apt-get install hipcc)")


@pytest.fixture(scope="module")
def hip_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hipcc = _tool("hipcc")
    where = tmp_path_factory.mktemp("hip")
    (where / "k.hip").write_text(KERNEL)
    library = where / "libk.so"
    archs = ["--offload-arch=gfx90a", "--offload-arch=gfx1030", "--offload-arch=gfx906:xnack-"]
    subprocess.run(
        [hipcc, "-fPIC", "-shared", *archs, "-o", str(library), str(where / "k.hip")],
        check=True,
        env={**os.environ, "HIP_PLATFORM": "amd"},
        capture_output=True,
        timeout=300,
    )
    return library


def test_the_targets_hipcc_compiled_are_read(hip_library: Path) -> None:
    code = read_offload_code(hip_library)
    assert code.archs == ("gfx906", "gfx90a", "gfx1030")
    assert "gfx906:xnack-" in {e.target_id for e in code.entries}
    assert any(e.is_host for e in code.entries)
    assert all(e.size > 0 for e in code.entries if not e.is_host)


def test_fdl_lists_what_clang_offload_bundler_lists(hip_library: Path, tmp_path: Path) -> None:
    bundler = _tool(
        "clang-offload-bundler",
        "/usr/lib/llvm-15/bin/clang-offload-bundler",
        "/usr/lib/llvm-16/bin/clang-offload-bundler",
    )
    section = tmp_path / "fatbin.bin"
    subprocess.run(
        ["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(hip_library), str(section)],
        check=True,
        timeout=60,
    )
    listed = subprocess.run(
        [bundler, "--list", "--type=o", f"--input={section}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert sorted(e.triple for e in read_offload_code(hip_library).entries) == sorted(listed)
