"""`fdl libtorch install --from-wheel --cpu` end to end, against a package index on
127.0.0.1 (tests/support/cpu_view_wheels.py): synthetic torch and NVIDIA wheels read by
HTTP Range, the tree and metadata the view makes, its cache, and its refusals."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.support import faulty_http
from tests.support.cpu_view_wheels import (
    CUPTI_WHEEL,
    RUNTIME_WHEEL,
    TORCH,
    TORCH_WHEEL,
    PackageIndex,
    torch_wheel,
)
from tests.support.faulty_http import FaultyServer

faulty_server = faulty_http.faulty_server  # the fixture

Fdl = Callable[..., Result]
CPU_WHEEL = f"torch-{TORCH}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_LIBRARY = "torch/lib/libtorch_cuda.so"
VIEW_LIB = {
    "libc10.so",
    "libcudart.so.12",
    "libcupti.so.12",
    "libgomp.so.1",
    "libtorch.so",
    "libtorch_cpu.so",
}


@pytest.fixture
def index(faulty_server: FaultyServer) -> PackageIndex:
    found = PackageIndex(faulty_server)
    found.add_torch()
    return found


@pytest.fixture
def fdl(run_fdl, tmp_path: Path, index: PackageIndex) -> Fdl:
    """``fdl -q ARGS`` in process, with its own FDL_HOME and cache, in ``work/``."""
    (tmp_path / "work").mkdir()

    def invoke(*args: str, home: str = "home") -> Result:
        env = {"FDL_HOME": str(tmp_path / home), "FDL_CACHE_DIR": str(tmp_path / "cache")}
        return run_fdl(["-q", *args], cwd=tmp_path / "work", env=env)

    return invoke


def install(fdl: Fdl, index: PackageIndex, *extra: str, home: str = "home") -> Result:
    return fdl(
        "libtorch",
        "install",
        "--from-wheel",
        "--cpu",
        "--torch",
        TORCH,
        "--index-url",
        index.url,
        "--json",
        *extra,
        home=home,
    )


def installed(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)


def variant_dir(tmp_path: Path, home: str = "home") -> Path:
    return tmp_path / home / "libtorch" / "precompiled" / "cpu"


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def wheel_member(data: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read(name)


def member_extent(data: bytes, name: str) -> tuple[int, int]:
    """Where member ``name`` lies in the zip: its local header to the next one."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        offsets = sorted(i.header_offset for i in archive.infolist())
        start = archive.getinfo(name).header_offset
    return start, next(o for o in offsets if o > start)


def test_a_local_wheel_file(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    wheel = tmp_path / TORCH_WHEEL
    wheel.write_bytes(torch_wheel())
    result = fdl(
        "libtorch",
        "install",
        "--from-wheel",
        str(wheel),
        "--cpu",
        "--index-url",
        index.url,
        "--json",
    )
    info = installed(result)
    assert info["source"]["wheel"] == wheel.as_uri()
    assert "index" not in info["source"] and info["source"]["nvidia_index"] == index.url
    assert {p.name for p in (variant_dir(tmp_path) / "lib").iterdir()} == VIEW_LIB
    asked = {e.path for e in index.server.log}
    assert index.file_path(TORCH_WHEEL) not in asked  # the file, not the index's copy
    assert {index.file_path(RUNTIME_WHEEL), index.file_path(CUPTI_WHEEL)} <= asked
