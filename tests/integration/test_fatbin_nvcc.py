"""The fatbin reader and the toolkit table against the real nvcc and the real torch wheel.

nvcc is CUDA 13.0's, from NVIDIA's wheels (``scripts/setup-machine.sh``); the wheel is
torch 2.14.1's cu130 build from PyPI, in the tests' cache (``tests/support/artefacts.py``).
Without either the tests skip, and fail in CI.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from fdl.binaries import read_device_code, read_dynamic
from fdl.compat import (
    ArchList,
    Kind,
    injected_libraries,
    parse_archs,
    runtime_libraries,
    toolkit,
    variant_targets,
)
from fdl.system import probe_nvcc
from tests.support.artefacts import pypi_wheel, skip_or_fail

KERNEL = """
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void run(float* x) { scale<<<1, 32>>>(x); }
"""
GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
         "libgcc_s.so.1", "libstdc++.so.6"}  # fmt: skip


@pytest.fixture(scope="module")
def nvcc() -> tuple[str, str, ArchList]:
    probe = probe_nvcc()
    if probe.value is None:
        skip_or_fail(f"{probe.reason or 'no nvcc'} (bash scripts/setup-machine.sh installs it)")
    return probe.value.path, probe.value.version, probe.value.targets


def _compile(
    nvcc_path: str, tmp_path: Path, archs: ArchList, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "kernel.cu"
    source.write_text(KERNEL)
    argv = [nvcc_path, "-shared", "-Xcompiler", "-fPIC", *archs.gencode_flags(), *flags,
            str(source), "-o", str(tmp_path / "libkernel.so")]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def test_reader_lists_exactly_what_nvcc_built(
    nvcc: tuple[str, str, ArchList], tmp_path: Path
) -> None:
    path, _, accepted = nvcc
    wanted = parse_archs("7.5;12.0+PTX")
    extra = [t for t in parse_archs("9.0a;10.0f") if t.code in accepted.codes()]
    archs = ArchList.of([*wanted, *extra])
    built = _compile(path, tmp_path, archs)
    assert built.returncode == 0, built.stderr
    code = read_device_code(tmp_path / "libkernel.so")
    assert code.targets == archs
    assert code.containers >= 1
    if extra:
        flagged = {e.target.code: (e.arch_specific, e.family) for e in code.entries}
        assert flagged.get("sm_90a", (True, False)) == (True, False)
        assert flagged.get("sm_100f", (False, True)) == (False, True)
    cuobjdump = shutil.which("cuobjdump") or shutil.which("cuobjdump", path=str(Path(path).parent))
    if cuobjdump:
        listed = subprocess.run([cuobjdump, "--list-elf", str(tmp_path / "libkernel.so")],
                                capture_output=True, text=True, check=True).stdout  # fmt: skip
        for target in archs.cubins:
            assert f".{target.code}." in listed


@pytest.mark.parametrize(
    "flags",
    [
        ("-Xfatbin", "-compress-all"),  # official builds since CUDA 11.8
        (
            "-Xfatbin",
            "-compress-all",
            "-compress-mode=size",
        ),  # official builds add it from CUDA 12.8 on
    ],
    ids=["compress-all", "compress-mode-size"],
)
def test_reader_reads_compressed_fatbins(
    nvcc: tuple[str, str, ArchList], tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """The flags fdl's builds and PyTorch's official ones use: every form still read."""
    path, version, accepted = nvcc
    if "-compress-mode=size" in flags and int(version.split(".")[0]) < 13:
        pytest.skip(f"nvcc {version} has no -compress-mode")
    forms = parse_archs("7.5;9.0a;10.0f;12.0+PTX")
    archs = ArchList.of([t for t in forms if t.code in accepted.codes()])
    plain = _compile(path, tmp_path, archs)
    assert plain.returncode == 0, plain.stderr
    size = (tmp_path / "libkernel.so").stat().st_size
    built = _compile(path, tmp_path, archs, flags)
    assert built.returncode == 0, built.stderr
    code = read_device_code(tmp_path / "libkernel.so")
    assert code.targets == archs
    assert any(e.compressed for e in code.entries), [e for e in code.entries]
    assert (tmp_path / "libkernel.so").stat().st_size <= size


def test_table_matches_what_this_nvcc_lists(nvcc: tuple[str, str, ArchList]) -> None:
    path, version, _ = nvcc
    listed = subprocess.run(
        [path, "--list-gpu-code"], capture_output=True, text=True, check=True
    ).stdout
    real = {t.code for t in parse_archs(listed.split())}
    table = {t.code for t in toolkit(version).targets if not t.suffix}
    assert real == table


def test_nvcc_13_rejects_pascal(nvcc: tuple[str, str, ArchList], tmp_path: Path) -> None:
    path, version, _ = nvcc
    if toolkit(version).major < 13:
        pytest.skip(f"nvcc {version} still compiles sm_61")
    built = _compile(path, tmp_path, parse_archs("6.1"))
    assert built.returncode != 0
    assert "Unsupported gpu architecture 'compute_61'" in built.stderr + built.stdout
    assert toolkit(version).problems(parse_archs("6.1"))


@pytest.fixture(scope="module")
def torch_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("torch214")
    with zipfile.ZipFile(pypi_wheel("torch==2.14.1")) as wheel:
        wheel.extract("torch/lib/libtorch_cuda.so", out)
    return out / "torch/lib/libtorch_cuda.so"


@pytest.mark.slow
@pytest.mark.network
def test_torch_2141_cu130_has_cubins_and_no_ptx(torch_lib: Path) -> None:
    code = read_device_code(torch_lib)
    plain = code.primary_targets()
    assert plain.codes() == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert code.ptx_archs == ()
    assert not any(t.kind is Kind.PTX for t in code.targets)
    # the table records what this binary really contains
    assert variant_targets("2.14.1", "cu130") == plain


@pytest.mark.slow
@pytest.mark.network
def test_torch_2141_needs_only_tabled_runtime_libraries(torch_lib: Path) -> None:
    libs = runtime_libraries("cu130")
    torch_own = {"libtorch_nvshmem.so", "libc10_cuda.so", "libc10.so", "libtorch_cpu.so"}
    for name in read_dynamic(torch_lib).needed:
        known = name in GLIBC or name in torch_own or name in injected_libraries()
        assert known or any(lib.matches(name) for lib in libs), name
