"""`fdl libtorch install --from-wheel --cpu` end to end, against a package index on
127.0.0.1 (tests/support/cpu_view_wheels.py): synthetic torch and NVIDIA wheels read by
HTTP Range, the tree and metadata the view makes, its cache, and its refusals, and `fdl
setup`'s fallback to it for a CPU pin on a GPU machine. About 30 s on 2 cores."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from fdl.binaries.synthetic import build_elf
from fdl.libtorch.sources._cpu_view import LINK_SCRIPT_MARK
from fdl.net import RetryPolicy
from tests.conftest import Result
from tests.support import faulty_http
from tests.support.cpu_view_wheels import (
    CUDA_ONLY,
    CUPTI_WHEEL,
    RUNTIME_WHEEL,
    TORCH,
    TORCH_WHEEL,
    PackageIndex,
    Wheel,
    record_line,
    torch_members,
    torch_wheel,
    wheel_bytes,
)
from tests.support.faulty_http import Drop, FaultyServer, Stall, Status

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
def fdl(run_fdl, tmp_path: Path) -> Fdl:
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


def test_view_of_a_cuda_wheel_holds_what_a_cpu_program_loads(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    result = installed(install(fdl, index))
    tree = variant_dir(tmp_path)
    assert result["installed"] is True and result["path"] == str(tree)
    assert {p.name for p in (tree / "lib").iterdir()} == VIEW_LIB
    assert files_under(tree / "include") == {"torch/x.h", "c10/macros/Macros.h"}
    assert files_under(tree / "share") == {
        "cmake/Torch/TorchConfig.cmake",
        "cmake/Torch/TorchConfigVersion.cmake",
    }
    members = torch_members()
    for name in ("libtorch_cpu.so", "libc10.so", "libgomp.so.1"):
        assert (tree / "lib" / name).read_bytes() == members[f"torch/lib/{name}"]
    # the NVIDIA libraries come from their wheels, byte for byte
    for wheel, directory, soname in (
        (RUNTIME_WHEEL, "nvidia/cuda_runtime/lib", "libcudart.so.12"),
        (CUPTI_WHEEL, "nvidia/cuda_cupti/lib", "libcupti.so.12"),
    ):
        served = next(w for ws in index.projects.values() for w in ws if w.filename == wheel)
        assert (tree / "lib" / soname).read_bytes() == wheel_member(
            served.data, f"{directory}/{soname}"
        )
    # libtorch.so is a linker script for -ltorch (the wheel's needs libtorch_cuda.so)
    script = (tree / "lib" / "libtorch.so").read_bytes()
    assert script.startswith(LINK_SCRIPT_MARK) and b"INPUT(-ltorch_cpu -lc10)" in script
    cmake = tree / "share" / "cmake" / "Torch"
    assert "CPU view made by fdl" in (cmake / "TorchConfig.cmake").read_text()
    assert (cmake / "TorchConfigVersion.cmake").read_bytes() == members[
        "torch/share/cmake/Torch/TorchConfigVersion.cmake"
    ]
    assert (tree / "build-version").read_text() == "2.10.0+cu128\n"

    info = json.loads((tree / "variant.json").read_text())
    assert info["cuda"] is None and info["torch"] == TORCH
    source = info["source"]
    assert (source["view"], source["wheel_cuda"], source["build_version"]) == (
        "cpu",
        "12.8",
        "2.10.0+cu128",
    )
    assert source["wheel"] == index.server.url(index.file_path(TORCH_WHEEL))
    assert source["index"] == index.url
    view = info["extra"]["cpu_view"]
    assert view["libraries"] == ["libc10.so", "libgomp.so.1", "libtorch_cpu.so"]
    # the wheel's libtorch.so is left out too: the linker script stands in for it
    assert view["left_out"] == ["libtorch.so", "libtorch_cuda.so", "libtorch_python.so"]
    assert sorted(n["from"] for n in view["nvidia_libraries"]) == [CUPTI_WHEEL, RUNTIME_WHEEL]
    arch = dict(
        line.split("=", 1) for line in (tree / ".arch").read_text().splitlines() if "=" in line
    )
    assert arch["cuda"] == "none" and arch["torch"] == TORCH

    # what was read: never libtorch_cuda.so, never the other releases and platforms
    wheel_path = index.file_path(TORCH_WHEEL)
    size = len(index.projects["torch"][-1].data)
    assert view["wheel_size"] == size
    # libtorch_cuda.so alone is 2 MiB: no range of the members read touches it
    assert index.server.sent(wheel_path) < CUDA_ONLY // 4
    cuda_start, cuda_end = member_extent(index.projects["torch"][-1].data, CUDA_LIBRARY)
    for entry in index.server.requests_to(wheel_path):
        first, _, last = (entry.range or "").removeprefix("bytes=").partition("-")
        if last:  # the directory's tail is read to the end: it may hold the member's end
            assert int(last) < cuda_start or int(first) >= cuda_end, entry.range
    asked = {e.path for e in index.server.log}
    assert asked <= index.paths()
    assert not any("2.9.1" in p or "aarch64" in p or "macosx" in p for p in asked)

    for command in (("info",), ("verify",)):
        said = fdl("libtorch", *command)
        assert said.exit_code == 0, said.output
        assert "a CPU view of a CUDA 12.8 build" in said.stdout
        assert "left out: libtorch_cuda.so" in said.stdout


def test_a_second_install_reads_nothing_and_a_fresh_one_reads_only_directories(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    server = index.server
    cold = installed(install(fdl, index))["extra"]["cpu_view"]
    assert cold["bytes_cached"] == 0 and cold["bytes_read"] > 0
    wheels = [index.file_path(n) for n in (TORCH_WHEEL, RUNTIME_WHEEL, CUPTI_WHEEL)]
    cold_sent = {path: server.sent(path) for path in wheels}

    server.clear_log()
    again = installed(install(fdl, index))
    assert again["installed"] is False and again["activated"] is True
    assert [e.path for e in server.log] == [index.page_path("torch")]  # the release's files

    # another FDL_HOME, the same cache: the zip directories are read, the members are not
    server.clear_log()
    fresh = installed(install(fdl, index, home="home2"))
    warm = fresh["extra"]["cpu_view"]
    assert fresh["installed"] is True and warm["bytes_cached"] > 0
    assert warm["bytes_read"] + warm["bytes_cached"] == cold["bytes_read"]
    sizes = {index.file_path(w.filename): len(w.data) for ws in index.projects.values() for w in ws}
    for path in wheels:
        # the 64 KiB tail that holds the directory (and the byte that sizes the file)
        assert server.sent(path) <= min(sizes[path], 1 << 16) + 1, path
        assert server.sent(path) < cold_sent[path], path
    assert files_under(variant_dir(tmp_path, "home2")) == files_under(variant_dir(tmp_path))


def test_an_html_index_with_relative_links_and_hash_fragments(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path
) -> None:
    index = PackageIndex(faulty_server, form="html")
    chosen = index.add_torch()
    info = installed(install(fdl, index))
    assert info["source"]["wheel"] == faulty_server.url(index.file_path(TORCH_WHEEL))
    assert info["source"]["wheel_sha256"] == chosen.sha256
    assert {p.name for p in (variant_dir(tmp_path) / "lib").iterdir()} == VIEW_LIB
    page = faulty_server.requests_to(index.page_path("torch"))[0]
    assert "application/vnd.pypi.simple.v1+json" in page.headers["accept"]


def test_a_cpu_wheel_is_taken_as_it_is(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path
) -> None:
    index = PackageIndex(faulty_server)
    index.add_torch()  # the CUDA build, and beside it a +cpu one: the +cpu one is read
    cpu = Wheel(CPU_WHEEL, torch_wheel(f"{TORCH}+cpu", cuda=None))
    index.add("torch", cpu)
    result = installed(install(fdl, index))
    tree = variant_dir(tmp_path)
    members = torch_members(f"{TORCH}+cpu", cuda=None)
    assert result["source"]["wheel"] == faulty_server.url(index.file_path(CPU_WHEEL))
    assert result["source"]["build_version"] == f"{TORCH}+cpu"
    assert {p.name for p in (tree / "lib").iterdir()} == {
        "libc10.so",
        "libgomp.so.1",
        "libtorch.so",
        "libtorch_cpu.so",
    }
    assert (tree / "lib" / "libtorch.so").read_bytes() == members["torch/lib/libtorch.so"]
    for name in ("Caffe2/Caffe2Config.cmake", "Torch/TorchConfig.cmake"):
        assert (tree / "share" / "cmake" / name).read_bytes() == members[
            f"torch/share/cmake/{name}"
        ]
    assert (tree / "build-version").read_text() == f"{TORCH}+cpu\n"
    view = result["extra"]["cpu_view"]
    assert view["left_out"] == ["libtorch_python.so"] and view["nvidia_libraries"] == []
    assert result["source"]["wheel_cuda"] is None
    asked = {e.path for e in faulty_server.log}
    assert not any(p.startswith("/simple/nvidia") or "nvidia" in p for p in asked)
    assert index.file_path(TORCH_WHEEL) not in asked
    said = fdl("libtorch", "info")
    assert "the CPU libraries of a CPU wheel" in said.stdout


def test_a_local_wheel_file(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    wheel = tmp_path / TORCH_WHEEL
    # libraries stored: a rebuild (below) has every member where this build has it
    stored = [name for name in torch_members() if name.startswith("torch/lib/")]
    wheel.write_bytes(torch_wheel(stored=stored))
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
    # the file's ranges are not copied into the cache (the NVIDIA wheels' are kept)
    ranges = tmp_path / "cache" / "wheels" / "ranges"
    kept = {p.parent.name for p in ranges.rglob("*-*") if p.is_file()}
    assert kept and not any(TORCH_WHEEL in name for name in kept)

    # the file rebuilt under the same name: the new build's bytes, not the first one's
    wheel.write_bytes(torch_wheel(seed=1, stored=stored))
    again = fdl(
        "libtorch",
        "install",
        "--from-wheel",
        str(wheel),
        "--cpu",
        "--index-url",
        index.url,
        "--force",
    )
    assert again.exit_code == 0, again.output
    lib = variant_dir(tmp_path) / "lib"
    rebuilt = torch_members(seed=1)["torch/lib/libtorch_cpu.so"]
    assert (lib / "libtorch_cpu.so").read_bytes() == rebuilt


def test_the_view_is_the_same_on_a_machine_that_has_the_cuda_runtime(
    fdl: Fdl, index: PackageIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The NVIDIA libraries come from their wheels even where the loader would find this
    machine's (a CUDA toolkit in ld.so.conf): the view must not depend on where it was made."""
    from fdl.binaries import closure

    host = tmp_path / "host-cuda"
    host.mkdir()
    (host / "libcudart.so.12").write_bytes(build_elf(needed=["libc.so.6"], soname="x"))
    monkeypatch.setattr(closure, "SYSTEM_DIRS", (str(host), *closure.SYSTEM_DIRS))
    installed(install(fdl, index))
    lib = variant_dir(tmp_path) / "lib"
    assert {p.name for p in lib.iterdir()} == VIEW_LIB
    served = next(w for w in index.projects["nvidia-cuda-runtime-cu12"])
    assert (lib / "libcudart.so.12").read_bytes() == wheel_member(
        served.data, "nvidia/cuda_runtime/lib/libcudart.so.12"
    )


def test_the_manifest_pinning_cpu_implies_the_view(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    (tmp_path / "work" / "fdl.yml").write_text(f'libtorch:\n  torch: "{TORCH}"\n  variant: cpu\n')
    info = installed(fdl("libtorch", "install", "--from-wheel", "--index-url", index.url, "--json"))
    assert info["source"]["view"] == "cpu" and info["torch"] == TORCH


def test_a_cuda_wheel_file_where_the_manifest_pins_cpu_is_refused_with_the_view_as_fix(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    """A file is installed as the build it is: the pin refuses it, naming the pin (where
    it is) and the two ways out, with the user's own file: its CPU view, or the CUDA
    build under its name (not a fix about pip's index fallback, which did not happen)."""
    (tmp_path / "work" / "fdl.yml").write_text("libtorch:\n  variant: cpu\n")
    wheel = tmp_path / TORCH_WHEEL
    wheel.write_bytes(torch_wheel())
    args = ("libtorch", "install", "--from-wheel", str(wheel), "--index-url", index.url)
    refused = fdl(*args)
    assert refused.exit_code == 2, refused.output
    assert (
        "the wheel is torch 2.10.0 (the cu128 build), but the project pins the cpu build "
        "(libtorch.variant at fdl.yml:2:12): nothing was installed"
    ) in refused.stderr
    assert f"fdl libtorch install --from-wheel {wheel} --cpu;" in refused.stderr
    assert f"fdl libtorch install --from-wheel {wheel} --name cu128" in refused.stderr
    assert "pip" not in refused.stderr
    assert index.server.log == []
    info = installed(fdl(*args, "--cpu", "--json"))
    assert info["cuda"] is None and info["source"]["view"] == "cpu"
    assert info["path"].endswith("precompiled/cpu")


@pytest.mark.parametrize(
    "source", [["--python", "python3"], ["--from-dir", "."]], ids=["python", "from-dir"]
)
def test_cpu_with_another_source_is_refused_with_the_fix(
    fdl: Fdl, index: PackageIndex, tmp_path: Path, source: list[str]
) -> None:
    wheel = ["--from-wheel"] if source[0] == "--python" else []
    result = fdl("libtorch", "install", *wheel, "--cpu", *source)
    assert result.exit_code == 2, result.output
    assert "--cpu reads a wheel file or the index's wheel" in result.stderr
    assert "fdl libtorch install --from-wheel --cpu --torch VERSION" in result.stderr
    assert index.server.log == []
    assert not (tmp_path / "home" / "libtorch" / "precompiled").exists()


def test_another_build_under_the_name_is_kept_without_force(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "libtorch.so").write_bytes(b"\x7fELF")
    (other / "build-version").write_text("2.9.1+cpu\n")
    adopted = fdl("libtorch", "install", "--from-dir", str(other), "--name", "cpu")
    assert adopted.exit_code == 0, adopted.output
    before = (variant_dir(tmp_path) / "lib" / "libtorch.so").read_bytes()

    refused = install(fdl, index)
    assert refused.exit_code == 2, refused.output
    assert "already holds libtorch 2.9.1+cpu" in refused.stderr
    assert "--force" in refused.stderr and "--name" in refused.stderr
    assert (variant_dir(tmp_path) / "lib" / "libtorch.so").read_bytes() == before
    assert not any(e.path.startswith("/files/") for e in index.server.log)

    replaced = installed(install(fdl, index, "--force"))
    assert replaced["installed"] is True and replaced["replaced"] is not None
    assert (variant_dir(tmp_path) / "lib" / "libtorch.so").read_bytes().startswith(LINK_SCRIPT_MARK)


# --- bad input and failures -------------------------------------------------------------
# Each ends in a documented exit code with what went wrong and how to go on, leaves no
# variant and nothing in the cache that the next run would take for complete, and the next
# run (the fault gone) installs the view.

BIG_RANGE = 1 << 17  # only the range holding libtorch_cpu.so asks for more


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """fetch_range's retries without their waits."""
    import fdl.net._ranges

    quick = RetryPolicy(attempts=3, base_delay=0.0, jitter=0.0)
    monkeypatch.setattr(fdl.net._ranges, "RetryPolicy", lambda: quick)


def failed(result: Result, code: int, *words: str) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    assert "\n  fix: " in result.stderr, result.stderr  # how to go on
    return result.stderr


def assert_nothing_left(tmp_path: Path) -> None:
    precompiled = tmp_path / "home" / "libtorch" / "precompiled"
    left = sorted(p.name for p in precompiled.iterdir()) if precompiled.is_dir() else []
    assert left == [], f"a variant or its staging was left: {left}"
    cache = tmp_path / "cache"
    files = [p for p in cache.rglob("*") if p.is_file()] if cache.is_dir() else []
    assert [p for p in files if p.name.endswith(".part")] == []
    for path in files:
        if path.parent.parent.name == "ranges" and "-" in path.name:
            length = path.name.rsplit("-", 1)[1]
            assert path.stat().st_size == int(length), f"an incomplete range: {path}"


def recovers(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    """The next run, the fault gone, installs the whole view."""
    info = installed(install(fdl, index))
    assert info["installed"] is True
    assert {p.name for p in (variant_dir(tmp_path) / "lib").iterdir()} == VIEW_LIB
    lib = variant_dir(tmp_path) / "lib"
    assert (lib / "libtorch_cpu.so").read_bytes() == torch_members()["torch/lib/libtorch_cpu.so"]


def test_a_range_cut_in_the_middle_is_resumed(
    fdl: Fdl, index: PackageIndex, tmp_path: Path, quick_retries: None
) -> None:
    path = index.file_path(TORCH_WHEEL)
    index.server.script(path, Drop(after=60_000), larger_than=BIG_RANGE)
    recovers(fdl, index, tmp_path)
    big = [e for e in index.server.requests_to(path) if e.fault == "Drop"]
    assert len(big) == 1
    first = int((big[0].range or "").removeprefix("bytes=").split("-")[0])
    starts = [
        int((e.range or "-").removeprefix("bytes=").split("-")[0] or 0)
        for e in index.server.requests_to(path)
    ]
    assert any(first < s <= first + 60_000 for s in starts)  # resumed, not started over


def test_a_range_that_keeps_breaking_off_says_to_run_again(
    fdl: Fdl, index: PackageIndex, tmp_path: Path, quick_retries: None
) -> None:
    path = index.file_path(TORCH_WHEEL)
    index.server.always(path, Drop(after=0), larger_than=BIG_RANGE)
    failed(install(fdl, index), 5, TORCH_WHEEL, "broke off", "run the same command again")
    assert_nothing_left(tmp_path)
    index.server.always(path, None)
    recovers(fdl, index, tmp_path)


@pytest.mark.parametrize("what", ["page", "directory", "member"])
def test_a_server_that_stops_sending_is_given_up_on(
    fdl: Fdl,
    index: PackageIndex,
    tmp_path: Path,
    quick_retries: None,
    monkeypatch: pytest.MonkeyPatch,
    what: str,
) -> None:
    """Nothing for $FDL_NET_DEADLINE seconds: exit 5, not a hang (the stall is far longer)."""
    monkeypatch.setenv("FDL_NET_DEADLINE", "1")
    path, larger = {
        "page": (index.page_path("torch"), -1),
        "directory": (index.file_path(TORCH_WHEEL), 1000),  # the 64 KiB tail
        "member": (index.file_path(TORCH_WHEEL), BIG_RANGE),
    }[what]
    index.server.always(path, Stall(after=0, seconds=60), larger_than=larger)
    failed(install(fdl, index), 5, "run the same command again")
    assert_nothing_left(tmp_path)
    index.server.always(path, None)
    recovers(fdl, index, tmp_path)


def test_a_zip_directory_read_that_breaks_off_says_to_run_again(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    path = index.file_path(TORCH_WHEEL)
    index.server.script(path, Drop(after=1000), larger_than=1000)  # the 64 KiB tail
    failed(install(fdl, index), 5, TORCH_WHEEL, "run the same command again")
    assert_nothing_left(tmp_path)
    recovers(fdl, index, tmp_path)


def damaged(
    data: bytes, member: str, change: Callable[[bytearray, zipfile.ZipInfo], None]
) -> bytes:
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        change(out, archive.getinfo(member))
    return bytes(out)


def flip_a_data_byte(out: bytearray, info: zipfile.ZipInfo) -> None:
    name_len, extra_len = struct.unpack_from("<HH", out, info.header_offset + 26)
    at = info.header_offset + 30 + name_len + extra_len + info.compress_size // 2
    out[at] ^= 0xFF


def rename_in_local_header(out: bytearray, info: zipfile.ZipInfo) -> None:
    at = info.header_offset + 30 + len(info.filename) - 1
    out[at] = ord("X")  # torch/lib/libgomp.so.1 -> torch/lib/libgomp.so.X


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (flip_a_data_byte, ("libgomp.so.1", "another CRC-32")),
        (rename_in_local_header, ("names torch/lib/libgomp.so.X, not torch/lib/libgomp.so.1",)),
    ],
    ids=["crc32", "local-header"],
)
def test_damaged_bytes_are_refused_and_not_kept(
    fdl: Fdl,
    faulty_server: FaultyServer,
    tmp_path: Path,
    change: Callable[[bytearray, zipfile.ZipInfo], None],
    words: tuple[str, ...],
) -> None:
    """The file host (or a proxy) serves damaged bytes under the sha256 the index lists:
    the member is refused, and the damaged range is not kept for the next run."""
    good = torch_wheel(stored=["torch/lib/libgomp.so.1"])  # a stored member: the CRC tells
    index = PackageIndex(faulty_server)
    index.add_torch(good)
    path = index.file_path(TORCH_WHEEL)
    faulty_server.add(path, damaged(good, "torch/lib/libgomp.so.1", change))
    failed(install(fdl, index), 1, TORCH_WHEEL, *words, "run the same command again")
    assert_nothing_left(tmp_path)
    faulty_server.add(path, good)
    info = installed(install(fdl, index))
    lib = variant_dir(tmp_path) / "lib"
    assert (lib / "libgomp.so.1").read_bytes() == torch_members()["torch/lib/libgomp.so.1"]
    assert info["source"]["wheel_sha256"] == hashlib.sha256(good).hexdigest()


@pytest.mark.parametrize(
    "forged",
    [
        record_line("torch/lib/libc10.so", b"another libc10"),
        "torch/lib/libc10.so,sha256=a,5",  # not base64: no sha256 at all
        "torch/lib/libc10.so,sha256=YWJj,5",  # base64, but not of 32 bytes
    ],
    ids=["another-digest", "not-base64", "short-digest"],
)
def test_a_member_that_does_not_match_record_is_refused(
    fdl: Fdl, faulty_server: FaultyServer, tmp_path: Path, forged: str
) -> None:
    members = torch_members()
    lines = members[f"torch-{TORCH}.dist-info/RECORD"].decode().splitlines()
    forged_lines = [forged if line.startswith("torch/lib/libc10.so,") else line for line in lines]
    members[f"torch-{TORCH}.dist-info/RECORD"] = ("\n".join(forged_lines) + "\n").encode()
    index = PackageIndex(faulty_server)
    index.add_torch(wheel_bytes(members))
    failed(install(fdl, index), 1, "libc10.so does not match the wheel's RECORD", "--index-url")
    assert_nothing_left(tmp_path)
    index.projects["torch"][-1] = Wheel(TORCH_WHEEL, torch_wheel())  # the index mends it
    faulty_server.add(index.file_path(TORCH_WHEEL), index.projects["torch"][-1].data)
    index.publish("torch")
    recovers(fdl, index, tmp_path)


def test_a_release_the_index_does_not_list(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    result = fdl(
        "libtorch",
        "install",
        "--from-wheel",
        "--cpu",
        "--torch",
        "2.11.0",
        "--index-url",
        index.url,
    )
    failed(
        result, 2, "no Linux x86_64 wheel of torch 2.11.0", "its newest: 2.9.1, 2.10.0", "--torch"
    )
    assert_nothing_left(tmp_path)
    assert [e.path for e in index.server.log] == [index.page_path("torch")]
    recovers(fdl, index, tmp_path)


def test_an_unreachable_index(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        result = fdl(
            "libtorch",
            "install",
            "--from-wheel",
            "--cpu",
            "--torch",
            TORCH,
            "--index-url",
            f"http://127.0.0.1:{port}/simple",
        )
    failed(result, 5, "cannot reach the package index", "--index-url")
    assert_nothing_left(tmp_path)
    recovers(fdl, index, tmp_path)


JSON = "application/vnd.pypi.simple.v1+json"


@pytest.mark.parametrize(
    ("body", "kind", "words"),
    [
        (
            b"<html><body><p>Service Unavailable</p></body></html>",
            "text/html",
            ("not a package index page",),
        ),
        (
            b"\x00\xff\xfe garbage \x89PNG",
            "application/octet-stream",
            ("not a package index page",),
        ),
        (b"[1, 2, 3]", JSON, ("a JSON answer without a list of files",)),
        (b'{"files": {"torch": 1}}', JSON, ("a JSON answer without a list of files",)),
        (
            b'{"files": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
            JSON,
            ("a JSON answer without a list of files",),
        ),
        (
            b"{" + b'"a": {' * 100_000 + b"}" * 100_001,
            JSON,
            ("a JSON answer without a list of files",),
        ),
    ],
    ids=["html", "binary", "json-list", "json-files-not-a-list", "deep-list", "deep-object"],
)
def test_an_index_page_that_is_not_one(
    fdl: Fdl, index: PackageIndex, tmp_path: Path, body: bytes, kind: str, words: tuple[str, ...]
) -> None:
    index.server.add(index.page_path("torch"), body, content_type=kind)
    failed(install(fdl, index), 5, *words)
    assert_nothing_left(tmp_path)
    index.publish("torch")
    recovers(fdl, index, tmp_path)


def test_an_index_page_over_32_mib_is_not_read_whole(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    page = b'{"files": [' + b" " * (33 << 20) + b"]}"
    index.server.add(index.page_path("torch"), page, content_type=JSON)
    failed(install(fdl, index), 5, "a page over 32 MiB")
    assert_nothing_left(tmp_path)
    index.publish("torch")
    recovers(fdl, index, tmp_path)


def test_an_nvidia_project_the_index_lacks(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    page = index.page_path("nvidia-cuda-cupti-cu12")
    index.server.always(page, Status(404))
    failed(install(fdl, index), 5, "no project 'nvidia-cuda-cupti-cu12'", "--index-url")
    assert_nothing_left(tmp_path)
    index.server.always(page, None)
    recovers(fdl, index, tmp_path)


def test_an_nvidia_release_the_index_lacks(fdl: Fdl, index: PackageIndex, tmp_path: Path) -> None:
    project = "nvidia-cuda-cupti-cu12"
    pinned = index.projects[project]
    index.projects[project] = [
        Wheel(CUPTI_WHEEL.replace("12.8.90", "12.6.80"), pinned[0].data),
        Wheel(CUPTI_WHEEL.replace("x86_64", "aarch64"), pinned[0].data),
    ]
    index.publish(project)
    failed(install(fdl, index), 5, f"no Linux x86_64 wheel of {project}==12.8.90", "--index-url")
    assert_nothing_left(tmp_path)
    index.projects[project] = pinned
    index.publish(project)
    recovers(fdl, index, tmp_path)


# --- fdl setup: a CPU pin never yields a CUDA build ---------------------------------------


def test_setup_of_a_cpu_pin_on_a_gpu_machine_falls_back_to_the_view_never_to_cuda(
    run_fdl, index: PackageIndex, tmp_path: Path
) -> None:
    """A project pinning `variant: cpu` on the GTX 1060 + RTX 5060 Ti rig, PyTorch's own
    host out of reach, an index serving only torch 2.10.0's CUDA 12.8 wheel: `fdl setup
    --yes` installs the CPU view of that wheel (read by range), never the CUDA build that
    `pip download torch==2.10.0` gives (15 NVIDIA wheels, 3.7 GB), and every `or:` line
    of the plan says what it installs."""
    project = tmp_path / "work"
    project.mkdir()
    (project / "fdl.yml").write_text(
        f'libtorch:\n  torch: "{TORCH}"\n  variant: cpu\n'
        f"  mirror: http://127.0.0.1:{_closed_port()}/\n"
    )
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        "#!/bin/sh\nprintf '0, NVIDIA GeForce GTX 1060 6GB, 6.1, 6144, 570.86\\n"
        "1, NVIDIA GeForce RTX 5060 Ti, 12.0, 16384, 570.86\\n'\n"
    )
    smi.chmod(0o755)
    env = {
        "PATH": f"{smi.parent}:/usr/bin:/bin",
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
        "PIP_INDEX_URL": index.url,
        "FDL_NET_DEADLINE": "2",  # the mirror refuses: fall back at once, not after retries
    }
    plan = run_fdl(["setup", "--dry-run"], cwd=project, env=env)
    assert plan.exit_code == 0, plan.output
    assert "plan: download: the project asks for cpu" in plan.stdout
    ors = [line for line in plan.stdout.splitlines() if line.lstrip().startswith("or:")]
    assert ors, plan.stdout
    for line in ors:  # each names what it installs, in parentheses after the command
        assert line.rstrip().endswith(")") and "   (" in line, line
    assert any("--from-wheel --cpu" in line and "CPU view" in line for line in ors), ors

    done = run_fdl(["setup", "--yes", "--json"], cwd=project, env=env)
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["done"] == "installed" and result["variant"] == "precompiled/cpu"
    info = json.loads(run_fdl(["libtorch", "info", "--json"], cwd=project, env=env).stdout)
    assert info["cuda"] is None and info["source"]["view"] == "cpu"
    assert info["source"]["wheel_cuda"] == "12.8"
    assert not (project / "libtorch" / "precompiled" / "cu128").exists()
    # the CUDA library was never read: only ranges of the torch wheel, no whole download
    assert not any(e.path.endswith(".whl") and e.range is None for e in index.server.log)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_download_over_the_view_says_it_holds_the_view(
    fdl: Fdl, index: PackageIndex, tmp_path: Path
) -> None:
    """The view's build version is the CUDA wheel's: the refusal says "the CPU view of",
    not a bare "libtorch 2.x.y+cuNNN" that reads as a CUDA libtorch in precompiled/cpu."""
    view = installed(install(fdl, index))
    assert view["variant"] == "precompiled/cpu"
    wheel = json.loads((variant_dir(tmp_path) / "variant.json").read_text())["source"]
    assert "+cu" in wheel["build_version"]

    refused = fdl("libtorch", "download", "--cpu", "--torch", TORCH)
    assert refused.exit_code == 2, refused.output
    assert (
        f"precompiled/cpu already holds the CPU view of the torch {wheel['build_version']} "
        "wheel (CPU only)" in refused.stderr
    )
    assert not index.server.log or all("libtorch" not in e.path for e in index.server.log)
