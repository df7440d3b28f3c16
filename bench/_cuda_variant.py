"""A CUDA libtorch variant and a CUDA build base made from PyPI's wheels (bench only).

- :func:`cuda_variant`: the torch 2.14.1 cu130 wheel's C++ distribution with the
  shared libraries of the nvidia-* wheels beside it in ``lib/`` (the layout a
  ``--from-wheel`` install with NVIDIA libraries makes), plus the host toolkit's
  libcudart. The torch wheel comes from PyPI into the tests' artefact cache
  (tests/support/artefacts.py), the nvidia-* wheels it requires through fdl's own
  ``pip download`` into the fdl cache kept there (as tests/integration/
  test_libtorch_wheel_cuda.py fetches them): downloaded once.
- :func:`cuda_build_base`: ``fdl-bench/cuda-devel:13.0``, the base image plus the
  host's CUDA 13.0 toolkit (/usr/local/cuda: nvcc, cudart, from NVIDIA's wheels by
  scripts/setup-machine.sh) and the nvidia wheels' headers; its ``lib64/libX.so`` links point into ``/opt/libtorch/lib``, where the
  build stage mounts the variant, so CMake's FindCUDAToolkit finds every library
  without a second copy. (No registry is reachable for nvidia/cuda:13.0.2-devel.)
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import zipfile
from functools import cache
from pathlib import Path

from fdl.engine import BuildSpec, Engine
from fdl.libtorch.sources._nvidia import fetch_wheels, nvidia_requirements
from fdl.libtorch.sources._wheel import wheel_from_file
from fdl.libtorch.variants import VariantInfo, write_info
from fdl.runner import SubprocessRunner
from tests.support.artefacts import cache_dir, download_wheel

TOOLKIT = Path("/usr/local/cuda")
BUILD_BASE = "fdl-bench/cuda-devel:13.0"
_SONAME = re.compile(r"^(lib[^/]*?\.so)\.\d+(?:\.\d+)*$")


def _extract(wheel: Path, prefixes: tuple[str, ...], target: Path, *, flat: bool) -> list[Path]:
    written = []
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if name.endswith("/") or not name.startswith(prefixes):
                continue
            if name.endswith("libtorch_python.so"):
                continue
            relative = Path(name).name if flat else name.split("/", 1)[1]
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, destination.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
            written.append(destination)
    return written


@cache
def _torch_wheel() -> Path:
    return download_wheel("torch==2.14.1")


@cache
def _nvidia_wheels() -> list[Path]:
    """The nvidia-* wheels torch 2.14.1 requires, as ``--from-wheel`` fetches them."""
    torch = _torch_wheel()
    wanted = nvidia_requirements(wheel_from_file(torch).requires)
    dest = cache_dir() / "fdl" / "wheels"
    runner = SubprocessRunner()
    return sorted(
        fetch_wheels(wanted, dest, python=sys.executable, runner=runner, find_links=[torch.parent])
    )


def cuda_variant(root: Path) -> Path:
    """``<root>/precompiled/cu130``: torch 2.14.1 + the nvidia-* libraries in lib/."""
    directory = root / "precompiled" / "cu130"
    if not (directory / "lib" / "libtorch_cuda.so").is_file():
        partial = root / ".partial-cu130"
        shutil.rmtree(partial, ignore_errors=True)
        prefixes = ("torch/lib/", "torch/include/", "torch/share/")
        _extract(_torch_wheel(), prefixes, partial, flat=False)
        for wheel in _nvidia_wheels():
            dirs = tuple(f"nvidia/{d}/lib/" for d in _lib_dirs(wheel))
            _extract(wheel, dirs, partial / "lib", flat=True)
        for cudart in glob.glob(str(TOOLKIT / "lib64" / "libcudart.so.*")):
            shutil.copy2(cudart, partial / "lib")
        directory.parent.mkdir(parents=True, exist_ok=True)
        partial.rename(directory)
    from fdl.binaries import read_device_code

    archs = read_device_code(directory / "lib" / "libtorch_cuda.so").cubin_archs
    write_info(
        directory,
        VariantInfo(
            name="precompiled/cu130",
            torch="2.14.1",
            cuda="13.0",
            cudnn="9.24",
            archs_found={"cubin": list(archs), "ptx": []},
            abi="cxx11",
            source={"kind": "wheel", "wheel": _torch_wheel().name},
            installed_at="2025-01-01T00:00:00Z",
        ),
    )
    return directory


def _lib_dirs(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            name.split("/")[1]
            for name in archive.namelist()
            if name.startswith("nvidia/") and "/lib/" in name
        }


def _stage_toolkit(stage: Path, variant: Path) -> None:
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(TOOLKIT, stage, symlinks=True)
    for wheel in _nvidia_wheels():
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                parts = member.filename.split("/")
                if len(parts) > 3 and parts[2] == "include" and not member.filename.endswith("/"):
                    destination = stage / "include" / "/".join(parts[3:])
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as source, destination.open("wb") as sink:
                        shutil.copyfileobj(source, sink)
    lib64 = stage / "lib64"
    for library in sorted((variant / "lib").iterdir()):
        found = _SONAME.match(library.name)
        if found is None or library.name.startswith(("libtorch", "libc10", "libshm")):
            continue
        link = lib64 / found.group(1)
        if not link.exists() and not link.is_symlink():
            os.symlink(f"/opt/libtorch/lib/{library.name}", link)


def cuda_build_base(base: str, engine: Engine, variant: Path, cache: Path) -> str:
    """Build (once) the CUDA 13.0 build base from the host toolkit; return its name."""
    if engine.image_exists(BUILD_BASE):
        return BUILD_BASE
    stage = cache / "cuda-toolkit"
    _stage_toolkit(stage, variant)
    dockerfile = (
        "ARG BASE_IMAGE\n"
        "FROM ${BASE_IMAGE}\n"
        "COPY . /usr/local/cuda/\n"
        "ENV CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:/usr/local/sbin:"
        "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    )
    engine.build(
        BuildSpec(
            context=stage,
            dockerfile_text=dockerfile,
            tags=(BUILD_BASE,),
            build_args={"BASE_IMAGE": base},
        )
    )
    return BUILD_BASE
