"""fdl's fatbin reader against NVIDIA's cuobjdump, on probes built by NVIDIA's compilers.

Every arch form the compat tables use (sm_XX, sm_XXa, sm_XXf, PTX, plain/a/f) and every
compression nvcc offers (none, ``-compress-mode=default|size|speed|balance``,
``-Xfatbin -compress-all``) is built and read both ways; the reader must list what
cuobjdump's header dump lists, entry by entry: kind, ``arch =`` and ``compressed``. The
local nvcc (13.0 here) builds the fast set; forms it cannot make come from NVIDIA's
PyPI wheels (slow, network): CUDA 13.5 (sm_107 family) and CUDA 12.9's ptxas (Pascal).

cuobjdump comes from NVIDIA's ``nvidia-cuda-cuobjdump`` wheel, installed by
``scripts/setup-machine.sh`` into ``$FDL_TEST_TOOLS/cuda/bin``, and nvcc 13.0 from its
wheels too; the 13.5 and 12.9 wheels come from PyPI into the tests' artefact cache
(``tests/support/artefacts.py``). Without them the tests skip, and fail in CI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from fdl.binaries import DeviceCode, parse_fatbin, read_device_code, scan_device_code
from fdl.compat import ArchList, parse_archs
from fdl.system import probe_nvcc
from tests.support.artefacts import pypi_wheel, skip_or_fail

KERNEL = """
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void run(float* x) { scale<<<1, 32>>>(x); }
"""
# (gencode arch, codes): every form, each family/arch-specific target as cubin and PTX
FORMS = [
    ("compute_75", ["sm_75"]),
    ("compute_90a", ["sm_90a", "compute_90a"]),
    ("compute_100a", ["sm_100a"]),
    ("compute_100f", ["sm_100f", "compute_100f"]),
    ("compute_103f", ["sm_103f"]),
    ("compute_110f", ["sm_110f"]),
    ("compute_120a", ["sm_120a", "compute_120a"]),
    ("compute_120f", ["sm_120f"]),
    ("compute_121f", ["sm_121f"]),
    ("compute_120", ["compute_120"]),
]
COMPRESSION = {
    "nvcc-default": (),
    "no-compress": ("-no-compress",),
    "mode-default": ("-compress-mode=default",),
    "mode-size": ("-compress-mode=size",),
    "mode-speed": ("-compress-mode=speed",),  # LZ4: flag 0x2000
    "mode-balance": ("-compress-mode=balance",),
    "compress-all": ("-Xfatbin", "-compress-all"),
}
Listing = list[tuple[str, str, bool]]


def _tools_dir() -> Path:
    return Path(os.environ.get("FDL_TEST_TOOLS", "/opt/fdl-test-tools"))


@pytest.fixture(scope="session")
def cuobjdump() -> str:
    found = shutil.which("cuobjdump") or shutil.which(
        "cuobjdump", path=str(_tools_dir() / "cuda" / "bin")
    )
    if not found:
        skip_or_fail("no cuobjdump: run scripts/setup-machine.sh (NVIDIA's cuobjdump wheel)")
    return found


def dumped(cuobjdump: str, path: Path) -> Listing:
    """(``elf``/``ptx``, ``arch =``, compressed) of every entry, from cuobjdump's header dump."""
    out = subprocess.run([cuobjdump, str(path)], capture_output=True, text=True, check=True)
    listing: Listing = []
    for block in re.split(r"^Fatbin ", out.stdout, flags=re.M)[1:]:
        arch = re.search(r"^arch = (\S+)", block, re.M)
        assert arch, block
        listing.append(
            (block.split()[0], arch.group(1), bool(re.search(r"^compressed$", block, re.M)))
        )
    return listing


def listed(cuobjdump: str, path: Path) -> list[tuple[str, str]]:
    """The arch of each file name ``cuobjdump --list-elf --list-ptx`` prints, in file order."""
    out = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(path)],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return re.findall(r"\.(sm_\w+)\.(cubin|ptx)$", out, re.M)


def read(code: DeviceCode) -> Listing:
    """The reader's view in cuobjdump's words (cuobjdump calls a PTX arch ``sm_XX``)."""
    return [
        ("ptx" if e.kind == 1 else "elf", e.target.code.replace("compute_", "sm_"), e.compressed)
        for e in code.entries
    ]


def assert_agrees(cuobjdump: str, path: Path, code: DeviceCode) -> Listing:
    listing = dumped(cuobjdump, path)
    assert read(code) == listing
    names = [(e.listed_as, "ptx" if e.kind == 1 else "cubin") for e in code.entries if e.is_code]
    assert names == listed(cuobjdump, path)
    return listing


def _gencode(nvcc_targets: ArchList | None) -> list[str]:
    flags = []
    for arch, codes in FORMS:
        keep = [c for c in codes if nvcc_targets is None or c.replace("compute_", "sm_").rstrip("af")
                in {t.code.rstrip("af") for t in nvcc_targets}]  # fmt: skip
        if keep:
            flags += ["-gencode", f"arch={arch},code=[{','.join(keep)}]"]
    return flags


def _build(nvcc: str, out: Path, flags: list[str], *, env: dict[str, str] | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "k.cu").write_text(KERNEL)
    lib = out / "libk.so"
    argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", *flags, str(out / "k.cu"), "-o", str(lib)]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert built.returncode == 0, built.stderr + built.stdout
    return lib


@pytest.fixture(scope="session")
def local_probe(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The local nvcc's probe library for a compression setting, built once per session."""
    probe = probe_nvcc()
    if probe.value is None:
        skip_or_fail(f"{probe.reason or 'no nvcc'} (bash scripts/setup-machine.sh installs it)")
    nvcc, targets = probe.value.path, probe.value.targets
    built: dict[str, Path] = {}

    def get(compression: str) -> Path:
        if compression not in built:
            out = tmp_path_factory.mktemp(f"probe-{compression}")
            built[compression] = _build(nvcc, out, [*_gencode(targets), *COMPRESSION[compression]])
        return built[compression]

    return get


FAST = ("nvcc-default", "mode-speed", "compress-all")  # zstd PTX; LZ4; zstd cubins


@pytest.mark.parametrize(
    "compression",
    [c if c in FAST else pytest.param(c, marks=pytest.mark.slow) for c in COMPRESSION],
)
def test_reader_lists_what_cuobjdump_lists(
    cuobjdump: str, local_probe: Callable[[str], Path], compression: str
) -> None:
    lib = local_probe(compression)
    code = read_device_code(lib)
    listing = assert_agrees(cuobjdump, lib, code)
    archs = {arch for _, arch, _ in listing}
    assert {"sm_75", "sm_90a", "sm_100f", "sm_120a", "sm_120f"} <= archs  # every form built
    assert {kind for kind, _, _ in listing} == {"elf", "ptx"}
    # the streaming scanner (wheels) reads the same, in small pieces
    data = lib.read_bytes()
    pieces = (data[i : i + 4093] for i in range(0, len(data), 4093))
    assert scan_device_code(pieces).entries == code.entries
    if compression == "mode-speed":
        assert {e.compression for e in code.entries if e.compressed} == {"lz4"}
    if compression in ("mode-size", "compress-all"):  # cubins too, with zstd
        assert all(e.compression == "zstd" for e in code.entries)
    if compression == "no-compress":
        assert not any(e.compressed for e in code.entries)


def test_family_cubins_are_listed_without_their_f(
    cuobjdump: str, local_probe: Callable[[str], Path]
) -> None:
    """cuobjdump's ``arch =`` says sm_100f, its --list-elf name says sm_100: the fatbin
    entry carries arch 100 and the family flag 0x200000 (the cubin's ELF e_flags are the
    same as a plain sm_100 cubin's)."""
    lib = local_probe("nvcc-default")
    code = read_device_code(lib)
    family = [e for e in code.entries if e.kind == 2 and e.family]
    assert family and all(e.flags & 0x200000 for e in family)
    cubins = [arch for arch, kind in listed(cuobjdump, lib) if kind == "cubin"]
    assert "sm_100f" not in cubins and "sm_100" in cubins
    assert "sm_100f" in [arch for _, arch, _ in dumped(cuobjdump, lib)]


def test_bare_fatbin_file(cuobjdump: str, tmp_path: Path) -> None:
    probe = probe_nvcc()
    if probe.value is None:
        skip_or_fail(f"{probe.reason or 'no nvcc'} (bash scripts/setup-machine.sh installs it)")
    (tmp_path / "k.cu").write_text(KERNEL)
    out = tmp_path / "k.fatbin"
    argv = [probe.value.path, "-fatbin", *_gencode(probe.value.targets), "-compress-mode=speed",
            str(tmp_path / "k.cu"), "-o", str(out)]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    entries, containers = parse_fatbin(out.read_bytes())
    assert containers == 1
    code = DeviceCode(out, tuple(entries), containers)
    assert_agrees(cuobjdump, out, code)


# --- forms the local nvcc cannot make: NVIDIA's toolkit wheels from PyPI ----------------


def _wheels(requirements: list[str]) -> list[Path]:
    return [pypi_wheel(requirement) for requirement in requirements]


def _unpack(wheels: list[Path], dest: Path) -> Path:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(dest)
    for program in dest.rglob("bin/*"):
        program.chmod(0o755)
    for program in dest.rglob("nvvm/bin/*"):
        program.chmod(0o755)
    return dest


@pytest.mark.slow
@pytest.mark.network
def test_cuda_135_wheels_sm_107_family(cuobjdump: str, tmp_path: Path) -> None:
    """CUDA 13.5's nvcc (nvcc + nvvm + crt + runtime wheels): the sm_107 family of the
    tables' 13.3-13.5 entries, as cubin and PTX, LZ4 and zstd."""
    reqs = [f"{name}==13.5.*" for name in
            ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime")]  # fmt: skip
    root = _unpack(_wheels(reqs), tmp_path / "cuda")
    nvcc = next(root.rglob("bin/nvcc"))
    flags = ["-gencode", "arch=compute_107f,code=[sm_107f,compute_107f]",
             "-gencode", "arch=compute_107a,code=sm_107a", "-gencode", "arch=compute_103,code=sm_103"]  # fmt: skip
    for mode in ("speed", "size"):
        lib = _build(str(nvcc), tmp_path / mode, [*flags, f"-compress-mode={mode}"])
        listing = assert_agrees(cuobjdump, lib, read_device_code(lib))
        assert {("elf", "sm_107f"), ("elf", "sm_107a"), ("ptx", "sm_107f")} <= {
            (kind, arch) for kind, arch, _ in listing
        }


@pytest.mark.slow
@pytest.mark.network
def test_pascal_from_cuda_129_ptxas(cuobjdump: str, tmp_path: Path) -> None:
    """sm_61 (in the tables' cu126 and older builds): CUDA 12.9's ptxas (its cu12 wheel has
    no nvcc driver) compiles the kernel's PTX, the local ``fatbinary`` packs cubin and PTX,
    uncompressed and LZ4-compressed (``--compress-all``'s flag before CUDA 12.8)."""
    probe = probe_nvcc()
    if probe.value is None:
        skip_or_fail(f"{probe.reason or 'no nvcc'} (bash scripts/setup-machine.sh installs it)")
    fatbinary = Path(probe.value.path).resolve().parent / "fatbinary"
    if not fatbinary.is_file():
        fatbinary = Path("/usr/local/cuda/bin/fatbinary")
    root = _unpack(_wheels(["nvidia-cuda-nvcc-cu12==12.9.*"]), tmp_path / "cu12")
    ptxas = next(root.rglob("bin/ptxas"))
    (tmp_path / "k.cu").write_text(KERNEL)
    ptx75 = tmp_path / "k75.ptx"
    subprocess.run([probe.value.path, "-ptx", "-arch=compute_75", str(tmp_path / "k.cu"), "-o",
                    str(ptx75)], check=True, capture_output=True, timeout=600)  # fmt: skip
    text = re.sub(r"^\.version .*$", ".version 7.0", ptx75.read_text(), flags=re.M)
    ptx61 = tmp_path / "k61.ptx"
    ptx61.write_text(re.sub(r"^\.target sm_75", ".target sm_61", text, flags=re.M))
    cubin = tmp_path / "k61.cubin"
    subprocess.run([str(ptxas), "-arch=sm_61", str(ptx61), "-o", str(cubin)], check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    for name, extra in (
        ("plain", ["--compress=false"]),
        ("lz4", ["--compress-all", "-compress-mode=speed"]),
    ):
        out = tmp_path / f"k61-{name}.fatbin"
        subprocess.run([str(fatbinary), f"--create={out}", "-64", *extra,
                        f"--image3=kind=elf,sm=61,file={cubin}", f"--image3=kind=ptx,sm=61,file={ptx61}"],
                       check=True, capture_output=True, timeout=600)  # fmt: skip
        entries, containers = parse_fatbin(out.read_bytes())
        code = DeviceCode(out, tuple(entries), containers)
        listing = assert_agrees(cuobjdump, out, code)
        assert [(k, a) for k, a, _ in listing] == [("elf", "sm_61"), ("ptx", "sm_61")]
        assert code.targets == parse_archs("6.1+PTX")
        if name == "lz4":
            assert {e.compression for e in code.entries} == {"lz4"}
