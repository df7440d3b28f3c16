"""The fake PyTorch source tree (tests/fixtures/fake-pytorch) builds like PyTorch's libtorch.

These tests build the tree directly, without fdl: copy it, run tools/build_libtorch.py with
an environment, and check what a user of the result sees (files, exit codes, messages, a
consumer program that trains a model, the device code inside libtorch_cuda.so).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.artefacts import require_nvcc

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FAKE_PYTORCH = FIXTURES / "fake-pytorch"
CONSUMER = FIXTURES / "fake-pytorch-consumer"
NVCC = shutil.which("nvcc")
BUILD_TIMEOUT = 900

# Variables the build reads; the host's values must not leak into a test build.
_BUILD_ENV = re.compile(
    r"^(BUILD_|USE_|CMAKE_|TORCH_|FAKE_TORCH_|PYTORCH_)|^(MAX_JOBS|DEBUG|REL_WITH_DEB_INFO)$"
)


@dataclass
class Build:
    """A copied source tree and what running the build script in it did."""

    src: Path
    cwd: Path
    returncode: int
    log: str

    @property
    def torch(self) -> Path:
        return self.src / "torch"

    @property
    def build_dir(self) -> Path:
        return self.cwd / "build"


def clean_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _BUILD_ENV.search(k)}
    env.update(overrides)
    return env


def copy_source(dest: Path) -> Path:
    shutil.copytree(FAKE_PYTORCH, dest)
    return dest


def run_build(src: Path, env: dict[str, str], cwd: Path | None = None, *args: str) -> Build:
    cwd = cwd or src
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(src / "tools" / "build_libtorch.py"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    return Build(src, cwd, proc.returncode, proc.stdout)


def build_consumer(torch_dir: Path, work: Path) -> tuple[str, Path]:
    """Configure, build and run the consumer example; return its CMake output and binary."""
    project = work / "consumer"
    shutil.copytree(CONSUMER, project)
    configure = subprocess.run(
        [
            "cmake",
            "-S",
            str(project),
            "-B",
            str(project / "build"),
            f"-DCMAKE_PREFIX_PATH={torch_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    build = subprocess.run(
        ["cmake", "--build", str(project / "build")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return configure.stdout, project / "build" / "train"


def run_train(binary: Path) -> str:
    proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def losses(output: str) -> list[float]:
    return [float(m) for m in re.findall(r"^epoch \d+ loss (\S+)$", output, re.MULTILINE)]


def nvcc_cuda_tag() -> str:
    """cu130 for nvcc 13.0."""
    out = subprocess.run([NVCC or "nvcc", "--version"], capture_output=True, text=True, check=True)
    major, minor = re.search(r"release (\d+)\.(\d+)", out.stdout).groups()  # type: ignore[union-attr]
    return f"cu{major}{minor}"


# --- device code, read from the ELF file (layout: compat-facts section 6) ------------


def elf_section(path: Path, name: str) -> bytes | None:
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "expected a 64-bit ELF file"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        (name_off,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name_off, offset, size

    _, str_off, _ = header(shstrndx)
    for i in range(shnum):
        name_off, offset, size = header(i)
        end = data.index(b"\0", str_off + name_off)
        if data[str_off + name_off : end].decode() == name:
            return data[offset : offset + size]
    return None


def fatbin_entries(blob: bytes) -> set[tuple[str, int, bool]]:
    """(kind, arch, compressed) of every entry of the fatbin containers in `blob`."""
    entries: set[tuple[str, int, bool]] = set()
    pos = 0
    while pos + 16 <= len(blob):
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != 0xBA55ED50:
            pos += 8
            continue
        entry = pos + header_size
        end = entry + body_size
        while entry < end:
            (kind,) = struct.unpack_from("<H", blob, entry)
            (entry_header,) = struct.unpack_from("<I", blob, entry + 4)
            (payload,) = struct.unpack_from("<Q", blob, entry + 8)
            (arch,) = struct.unpack_from("<I", blob, entry + 0x1C)
            (flags,) = struct.unpack_from("<Q", blob, entry + 0x28)
            entries.add(({1: "ptx", 2: "cubin"}.get(kind, str(kind)), arch, bool(flags & 0x8000)))
            entry += entry_header + payload
        pos = (end + 7) // 8 * 8
    return entries


# --- builds shared by several tests ---------------------------------------------------


@pytest.fixture(scope="module")
def cpu_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """CPU-only build run from a separate build directory, with extra options to record."""
    base = tmp_path_factory.mktemp("cpu")
    env = clean_env(
        USE_CUDA="0",
        FAKE_TORCH_UNITS="3",
        USE_DISTRIBUTED="0",
        USE_KINETO="0",
        BUILD_TEST="1",
        CMAKE_POLICY_VERSION_MINIMUM="3.5",
    )
    return run_build(copy_source(base / "pytorch"), env, base / "work")


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """Two archs nvcc 13 accepts, PTX for the newest, compressed fatbins, flash attention on."""
    require_nvcc()
    base = tmp_path_factory.mktemp("cuda")
    env = clean_env(
        USE_CUDA="1",
        TORCH_CUDA_ARCH_LIST="7.5;12.0+PTX",
        TORCH_NVCC_FLAGS="-Xfatbin -compress-all",
        USE_FLASH_ATTENTION="1",
        FAKE_TORCH_UNITS="2",
        BUILD_TEST="0",
    )
    return run_build(copy_source(base / "pytorch"), env)


@pytest.fixture(scope="module")
def sm61_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """sm_61 (Pascal), which nvcc 13 no longer compiles; flash attention off."""
    require_nvcc()
    base = tmp_path_factory.mktemp("sm61")
    env = clean_env(
        USE_CUDA="1",
        TORCH_CUDA_ARCH_LIST="6.1",
        USE_FLASH_ATTENTION="0",
        FAKE_TORCH_UNITS="1",
        BUILD_TEST="0",
    )
    return run_build(copy_source(base / "pytorch"), env)


# --- CPU --------------------------------------------------------------------------------


@pytest.mark.slow
def test_cpu_build_installs_libtorch_layout_into_source_tree(cpu_build: Build) -> None:
    assert cpu_build.returncode == 0, cpu_build.log[-4000:]
    lib = cpu_build.torch / "lib"
    assert sorted(p.name for p in lib.iterdir()) == ["libc10.so", "libtorch.so", "libtorch_cpu.so"]
    assert (cpu_build.torch / "include/torch/csrc/api/include/torch/torch.h").is_file()
    assert (cpu_build.torch / "include/c10/core/Device.h").is_file()
    assert (cpu_build.torch / "share/cmake/Torch/TorchConfig.cmake").is_file()
    assert (cpu_build.torch / "share/cmake/Torch/TorchConfigVersion.cmake").is_file()
    assert (cpu_build.torch / "build-version").read_text() == "2.13.0+cpu\n"
    assert re.fullmatch(r"[0-9a-f]{40}\n", (cpu_build.torch / "build-hash").read_text())


@pytest.mark.slow
def test_build_dir_is_under_the_working_directory(cpu_build: Build) -> None:
    assert cpu_build.cwd != cpu_build.src
    assert (cpu_build.cwd / "build" / "CMakeCache.txt").is_file()
    assert not (cpu_build.src / "build").exists()
    assert (cpu_build.build_dir / "build.ninja").is_file() == (shutil.which("ninja") is not None)


@pytest.mark.slow
def test_max_jobs_defaults_to_all_cores(cpu_build: Build) -> None:
    build_line = next(line for line in cpu_build.log.splitlines() if "--build" in line)
    assert build_line.endswith(f"-j {os.cpu_count()}")


@pytest.mark.slow
def test_forwarded_options_are_recorded_and_honoured(cpu_build: Build, tmp_path: Path) -> None:
    _, binary = build_consumer(cpu_build.torch, tmp_path)
    out = run_train(binary)
    settings = next(line for line in out.splitlines() if "Build settings:" in line)
    for item in (
        "USE_DISTRIBUTED=0",
        "USE_KINETO=0",
        "USE_CUDA=0",
        "BUILD_TEST=1",
        "FAKE_TORCH_UNITS=3",
    ):
        assert item in settings
    assert "Registered operators: 3" in out
    test_api = subprocess.run(
        [str(cpu_build.build_dir / "bin" / "test_api")], capture_output=True, text=True, check=False
    )
    assert test_api.returncode == 0 and "test_api: OK" in test_api.stdout


@pytest.mark.slow
def test_consumer_trains_against_cpu_build(cpu_build: Build, tmp_path: Path) -> None:
    cmake_out, binary = build_consumer(cpu_build.torch, tmp_path)
    assert "Torch 2.13.0 (2.13.0+cpu)" in cmake_out
    assert "Torch CUDA: OFF" in cmake_out
    out = run_train(binary)
    values = losses(out)
    assert len(values) == 20
    assert values[-1] < values[0] / 100
    assert all(b < a for a, b in itertools.pairwise(values))
    assert "CUDA available: false" in out


@pytest.mark.slow
def test_built_tree_is_relocatable(cpu_build: Build, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "libtorch"
    for part in ("lib", "include", "share"):  # what a libtorch install keeps of torch/
        shutil.copytree(cpu_build.torch / part, moved / part, symlinks=True)
    cmake_out, binary = build_consumer(moved, tmp_path)
    assert f"at {moved}" in cmake_out
    runpath = subprocess.run(
        ["readelf", "-d", str(binary)], capture_output=True, text=True, check=True
    )
    assert str(moved / "lib") in runpath.stdout
    assert str(cpu_build.torch) not in runpath.stdout
    assert losses(run_train(binary))


@pytest.mark.slow
def test_make_is_used_without_ninja_and_debug_sets_build_type(tmp_path: Path) -> None:
    env = clean_env(USE_CUDA="0", USE_NINJA="0", DEBUG="1", FAKE_TORCH_UNITS="1", BUILD_TEST="0")
    build = run_build(copy_source(tmp_path / "pytorch"), env)
    assert build.returncode == 0, build.log[-4000:]
    assert (build.build_dir / "Makefile").is_file()
    assert not (build.build_dir / "build.ninja").exists()
    cache = (build.build_dir / "CMakeCache.txt").read_text()
    assert "CMAKE_BUILD_TYPE:STRING=Debug" in cache
    assert (build.torch / "lib" / "libtorch.so").is_file()


@pytest.mark.slow
def test_compile_error_fails_with_the_compilers_message(tmp_path: Path) -> None:
    src = copy_source(tmp_path / "pytorch")
    with (src / "c10/util/Exception.cpp").open("a") as f:
        f.write('\n#error "fake-pytorch deliberately broken"\n')
    build = run_build(src, clean_env(USE_CUDA="0", FAKE_TORCH_UNITS="1", BUILD_TEST="0"))
    assert build.returncode == 1
    assert "fake-pytorch deliberately broken" in build.log
    assert not (build.torch / "lib").exists()


def test_install_prefix_from_environment_is_refused(tmp_path: Path) -> None:
    build = run_build(
        copy_source(tmp_path / "pytorch"),
        clean_env(USE_CUDA="0", CMAKE_INSTALL_PREFIX=str(tmp_path)),
    )
    assert build.returncode == 1
    assert "CMAKE_INSTALL_PREFIX should not be specified in the environment variable" in build.log


@pytest.mark.slow
def test_interrupted_build_resumes_without_recompiling(tmp_path: Path) -> None:
    src = copy_source(tmp_path / "pytorch")
    env = clean_env(USE_CUDA="0", FAKE_TORCH_UNITS="6", MAX_JOBS="1", BUILD_TEST="0")
    objects_dir = src / "build" / "CMakeFiles"
    with (tmp_path / "first.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "tools/build_libtorch.py"],
            cwd=src,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: ninja and the compilers too
        )
        deadline = time.monotonic() + 300
        while len(list(objects_dir.rglob("*.o"))) < 3:
            assert proc.poll() is None, "the build ended before it could be interrupted"
            assert time.monotonic() < deadline, "no objects were compiled"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 1
    done = {path: path.stat().st_mtime_ns for path in objects_dir.rglob("*.o")}
    assert not (src / "torch" / "lib").exists()

    resumed = run_build(src, env)
    assert resumed.returncode == 0, resumed.log[-4000:]
    assert "-- Configuring done" not in resumed.log
    after = {path: path.stat().st_mtime_ns for path in objects_dir.rglob("*.o")}
    assert {path: after.get(path) for path in done} == done
    compiled_again = resumed.log.count("Building CXX object")
    assert compiled_again == len(after) - len(done)
    assert (src / "torch" / "lib" / "libtorch.so").is_file()


@pytest.mark.slow
def test_changed_environment_needs_rerun_cmake(tmp_path: Path) -> None:
    src = copy_source(tmp_path / "pytorch")
    config = src / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake"
    first = run_build(src, clean_env(USE_CUDA="0", FAKE_TORCH_UNITS="2", BUILD_TEST="0"))
    assert first.returncode == 0, first.log[-4000:]
    total = first.log.count("Building CXX object")

    changed = clean_env(USE_CUDA="0", FAKE_TORCH_UNITS="3", BUILD_TEST="0")
    ignored = run_build(src, changed)
    assert ignored.returncode == 0
    assert "Building CXX object" not in ignored.log
    assert "FAKE_TORCH_UNITS=2" in config.read_text()

    redone = run_build(src, changed, None, "--rerun-cmake")
    assert redone.returncode == 0, redone.log[-4000:]
    assert "-- Configuring done" in redone.log
    assert "FAKE_TORCH_UNITS=3" in config.read_text()
    assert 0 < redone.log.count("Building CXX object") < total / 2  # finished objects kept


# --- CUDA -------------------------------------------------------------------------------


@pytest.mark.slow
def test_cuda_build_contains_requested_device_code(cuda_build: Build) -> None:
    assert cuda_build.returncode == 0, cuda_build.log[-4000:]
    assert "Added CUDA NVCC flags for: sm_75 sm_120 compute_120" in cuda_build.log
    lib = cuda_build.torch / "lib"
    assert {p.name for p in lib.iterdir()} == {
        "libc10.so",
        "libc10_cuda.so",
        "libtorch.so",
        "libtorch_cpu.so",
        "libtorch_cuda.so",
    }
    fatbin = elf_section(lib / "libtorch_cuda.so", ".nv_fatbin")
    assert fatbin is not None
    entries = fatbin_entries(fatbin)
    assert {(kind, arch) for kind, arch, _ in entries} == {
        ("cubin", 75),
        ("cubin", 120),
        ("ptx", 120),
    }
    # TORCH_NVCC_FLAGS=-Xfatbin -compress-all reached nvcc
    assert all(compressed for _, _, compressed in entries)
    assert (cuda_build.torch / "build-version").read_text() == f"2.13.0+{nvcc_cuda_tag()}\n"


@pytest.mark.slow
def test_flash_attention_unit_is_compiled_when_on(cuda_build: Build) -> None:
    assert "flash_fwd.cu" in cuda_build.log
    symbols = subprocess.run(
        ["nm", "-DC", "--defined-only", str(cuda_build.torch / "lib" / "libtorch_cuda.so")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "at::native::cuda::flash_attention_forward" in symbols.stdout


@pytest.mark.slow
def test_consumer_trains_against_cuda_build(cuda_build: Build, tmp_path: Path) -> None:
    cmake_out, binary = build_consumer(cuda_build.torch, tmp_path)
    assert "Torch CUDA: ON, archs: 7.5;12.0+PTX" in cmake_out
    out = run_train(binary)
    values = losses(out)
    assert len(values) == 20 and values[-1] < values[0] / 100
    assert "TORCH_CUDA_ARCH_LIST: 7.5;12.0+PTX" in out  # libtorch_cuda.so was loaded
    assert "NVCC architecture flags: -gencode arch=compute_75,code=sm_75" in out


@pytest.mark.slow
def test_sm61_fails_with_nvccs_unsupported_arch_message(sm61_build: Build) -> None:
    assert sm61_build.returncode == 1
    assert "Unsupported gpu architecture 'compute_61'" in sm61_build.log
    assert not (sm61_build.torch / "lib").exists()


@pytest.mark.slow
def test_flash_attention_off_leaves_out_the_heavy_unit(sm61_build: Build) -> None:
    build_graph = (sm61_build.build_dir / "build.ninja").read_text()
    assert "BinaryOps.cu" in build_graph
    assert "flash_fwd.cu" not in build_graph


@pytest.mark.slow
def test_unset_arch_list_falls_back_to_common_archs_nvcc_13_rejects(tmp_path: Path) -> None:
    require_nvcc()
    env = clean_env(USE_CUDA="1", USE_FLASH_ATTENTION="0", FAKE_TORCH_UNITS="1", BUILD_TEST="0")
    build = run_build(copy_source(tmp_path / "pytorch"), env)
    assert "Automatic GPU detection failed. Building for common architectures." in build.log
    assert "Autodetected CUDA architecture(s): 5.0;" in build.log
    assert build.returncode == 1
    assert "Unsupported gpu architecture 'compute_50'" in build.log


# --- the arch-list grammar, through the fixture's own CMake module ------------------------


@pytest.mark.parametrize(
    ("arch_list", "expected"),
    [
        ("6.1;12.0+PTX", "sm_61 sm_120 compute_120"),
        ("7.5 8.6  12.0", "sm_75 sm_86 sm_120"),
        ("9.0a;10.0f+PTX", "sm_90a sm_100f compute_100f"),
        ("8.6(8.0)+PTX", "sm_86 compute_80"),
        ("Pascal;Blackwell+PTX", "sm_60 sm_61 sm_100 sm_120 compute_120"),
        ("7.5;7.5", "sm_75"),
        ("Common", "sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 compute_90"),
    ],
)
def test_arch_list_grammar(arch_list: str, expected: str, tmp_path: Path) -> None:
    script = tmp_path / "probe.cmake"
    script.write_text(
        f'include("{FAKE_PYTORCH / "cmake" / "SelectCudaArch.cmake"}")\n'
        'torch_cuda_select_nvcc_arch_flags(FLAGS "${ARCHS}")\n'
        'list(JOIN FLAGS " " JOINED)\n'
        'message("${FLAGS_readable}|${JOINED}")\n'
    )
    proc = subprocess.run(
        ["cmake", f"-DARCHS={arch_list}", "-P", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    readable, flags = proc.stderr.strip().split("|")
    assert readable == expected
    if arch_list == "6.1;12.0+PTX":
        assert flags == (
            "-gencode arch=compute_61,code=sm_61 -gencode arch=compute_120,code=sm_120 "
            "-gencode arch=compute_120,code=compute_120"
        )


def test_unknown_arch_name_is_a_configure_error(tmp_path: Path) -> None:
    script = tmp_path / "probe.cmake"
    script.write_text(
        f'include("{FAKE_PYTORCH / "cmake" / "SelectCudaArch.cmake"}")\n'
        'torch_cuda_select_nvcc_arch_flags(FLAGS "7.5;Fermi")\n'
    )
    proc = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "Unknown CUDA Architecture Name Fermi in CUDA_SELECT_NVCC_ARCH_FLAGS" in proc.stderr
