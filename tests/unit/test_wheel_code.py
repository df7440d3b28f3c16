"""The GPU code of a wheel's library, streamed through Range reads of a synthetic wheel
(no network): the zip directory, chunked inflate, the streaming fatbin scanner, drift."""

from __future__ import annotations

import io
import random
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.archive import ArchiveError
from fdl.binaries import DeviceCode, FatbinEntry, read_device_code, scan_device_code
from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin
from fdl.errors import NetworkError
from fdl.refresh._wheel_code import (
    code_drift,
    wheel_code_report,
    wheel_device_code,
    zip_members,
)

LZ4, ZSTD, ARCH_SPECIFIC, FAMILY = 0x2000, 0x8000, 0x100000, 0x200000
LIB = "torch/lib/libtorch_cuda.so"
URL = "https://files.example/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"


def _library() -> bytes:
    """An ELF whose .nv_fatbin has two containers, and whose .rodata holds a valid-looking
    container that is not GPU code (a stream scanner must not count it)."""
    decoy = build_fatbin([[FakeEntry("cubin", 37)]])
    fatbin = build_fatbin(
        [
            [FakeEntry("cubin", 75, payload=3000), FakeEntry("cubin", 120, ZSTD, payload=5000)],
            [
                FakeEntry("cubin", 90, ARCH_SPECIFIC),
                FakeEntry("cubin", 100, FAMILY | LZ4),
                FakeEntry("ptx", 120, ZSTD, payload=777),
            ],
        ]
    )
    text = bytes(range(256)) * 40
    noise = random.Random(13).randbytes(20_000)  # keeps the deflated member over 10 kB
    return build_elf({".text": text, ".rodata": decoy, ".nv_fatbin": fatbin, ".data": noise})


class FakeRanges:
    """``fdl.net.read_range`` over bytes in memory, recording each request."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.requests: list[tuple[int, int | None]] = []

    def __call__(self, url: str, start: int, length: int | None = None) -> tuple[bytes, int]:
        assert url == URL
        self.requests.append((start, length))
        if start < 0:
            start = max(0, len(self.data) + start)
        end = len(self.data) if length is None else start + length
        return self.data[start:end], len(self.data)


def _wheel(members: dict[str, bytes], *, zip64: bool = False) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in members.items():
            with wheel.open(name, "w", force_zip64=zip64) as member:
                member.write(data)
    return out.getvalue()


@pytest.fixture
def library(tmp_path: Path) -> Path:
    path = tmp_path / "libtorch_cuda.so"
    path.write_bytes(_library())
    return path


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


@pytest.mark.parametrize("size", [1, 3, 8, 13, 64, 4096, 1 << 20])
def test_stream_scan_equals_the_mapped_reader(library: Path, size: int) -> None:
    whole = read_device_code(library)
    streamed = scan_device_code(_chunks(library.read_bytes(), size), "libtorch_cuda.so")
    assert streamed.entries == whole.entries
    assert streamed.containers == whole.containers == 2
    assert "sm_37" not in streamed.counts()  # the decoy in .rodata
    assert streamed.cubin_archs == ("sm_75", "sm_90a", "sm_100f", "sm_120")
    assert streamed.ptx_archs == ("compute_120",)


def test_stream_of_a_bare_fatbin_keeps_every_container() -> None:
    blob = build_fatbin([[FakeEntry("cubin", 61), FakeEntry("ptx", 61, LZ4)]])
    code = scan_device_code(_chunks(b"\0" * 8 + blob, 5))
    assert [(e.target.code, e.compression) for e in code.entries] == [
        ("sm_61", ""),
        ("compute_61", "lz4"),
    ]


def test_compression_flags_and_cuobjdump_names() -> None:
    entry = FatbinEntry(2, 100, FAMILY | LZ4, 10, 0)
    assert entry.compressed and entry.compression == "lz4"
    assert entry.target.code == "sm_100f"  # cuobjdump's "arch = sm_100f"
    assert entry.listed_as == "sm_100"  # its --list-elf file name
    ptx = FatbinEntry(1, 100, FAMILY | ZSTD, 10, 0)
    assert (ptx.compression, ptx.listed_as) == ("zstd", "sm_100f")
    assert FatbinEntry(2, 90, ARCH_SPECIFIC, 1, 0).listed_as == "sm_90a"
    assert not FatbinEntry(2, 75, 0x11, 1, 0).compressed


@pytest.mark.parametrize("zip64", [False, True])
def test_wheel_member_is_streamed_in_range_requests(library: Path, zip64: bool) -> None:
    data = library.read_bytes()
    wheel = _wheel(
        {
            "torch/__init__.py": b"",
            LIB: data,
            "torch-2.14.1.dist-info/METADATA": b"Version: 2.14.1\n",
        },
        zip64=zip64,
    )
    ranges = FakeRanges(wheel)
    members = zip_members(URL, ranges)
    assert members[LIB].size == len(data)
    small = FakeRanges(wheel)
    # many small requests: the inflate must carry its state across them
    found = wheel_device_code(URL, small, chunk=1000)
    assert found.libraries[LIB].entries == read_device_code(library).entries
    body_requests = [r for r in small.requests if r[1] == 1000]
    assert members[LIB].compressed > 10_000
    assert len(body_requests) == members[LIB].compressed // 1000
    assert found.bytes_read == sum(len(ranges_read(small, r)) for r in small.requests)
    assert found.bytes_read < len(wheel) + (1 << 16)


def ranges_read(ranges: FakeRanges, request: tuple[int, int | None]) -> bytes:
    start, length = request
    if start < 0:
        start = max(0, len(ranges.data) + start)
    return ranges.data[start : None if length is None else start + length]


def test_cpu_wheel_has_no_library() -> None:
    ranges = FakeRanges(_wheel({"torch/lib/libtorch_cpu.so": b"\x7fELF"}))
    found = wheel_device_code(URL, ranges)
    assert found.missing == [LIB] and not found.libraries
    report, drift = wheel_code_report("2.14.1", "linux-x86_64", URL, ranges)
    assert report["summary"] == "no libtorch_cuda.so (a CPU wheel)" and drift == []


def test_not_a_zip_and_a_damaged_member_are_refused(library: Path) -> None:
    with pytest.raises(ArchiveError, match="no zip directory"):
        zip_members(URL, FakeRanges(b"not a zip" * 100))
    wheel = bytearray(_wheel({LIB: library.read_bytes()}))
    member = zip_members(URL, FakeRanges(bytes(wheel)))[LIB]
    start = member.local_offset + 30 + len(LIB)
    wheel[start : start + 64] = b"\xff" * 64
    with pytest.raises(NetworkError, match="does not inflate"):
        wheel_device_code(URL, FakeRanges(bytes(wheel)))


def _code(*targets: tuple[int, int, int], count: int = 10) -> DeviceCode:
    entries = [FatbinEntry(kind, arch, flags, 1, 0) for kind, arch, flags in targets] * count
    return DeviceCode(Path(LIB), tuple(entries), 1)


def test_drift_against_the_default_variant() -> None:
    from fdl.compat import release

    variant = next(v for v in release("2.14.1").variants if v.default)
    table = variant.targets_for("2.14.1")
    same = _code(*[(2, t.capability.number, 0) for t in table.cubins])
    assert code_drift("2.14.1", "linux-x86_64", same) == []
    with_ptx = _code(*[(2, t.capability.number, 0) for t in table.cubins], (1, 120, ZSTD))
    drift = code_drift("2.14.1", "linux-x86_64", with_ptx)
    assert [(d["fact"], d["artefact"]) for d in drift] == [("default.ptx", "compute_120")]
    assert code_drift("2.14.1", "linux-aarch64", with_ptx) == []  # tables describe x86_64


def test_report_names_archs_ptx_and_cost(library: Path) -> None:
    ranges = FakeRanges(_wheel({LIB: library.read_bytes()}))
    report, _ = wheel_code_report("2.14.1", "linux-x86_64", URL, ranges)
    assert report["cubins"] == ["sm_75", "sm_90a", "sm_100f", "sm_120"]
    assert report["ptx"] == ["compute_120"]
    assert report["compression"] == ["lz4", "none", "zstd"]
    assert isinstance(report["bytes_read"], int) and report["bytes_read"] > 0


def test_refresh_wheels_command_reports_device_code(
    library: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import fdl.net
    from fdl.refresh.__main__ import main

    metadata = b"Version: 2.14.1\nRequires-Dist: nvidia-cuda-runtime==13.0.96\n"
    wheel = _wheel({LIB: library.read_bytes(), "torch-2.14.1.dist-info/METADATA": metadata})
    project = {"releases": {"2.14.1": [{"filename": URL.rsplit("/", 1)[1], "url": URL}]}}

    def fake(url: str, start: int, length: int | None = None) -> tuple[bytes, int]:
        if url.endswith("/json"):
            body = json.dumps(project).encode()
            return body, len(body)
        return FakeRanges(wheel)(url, start, length)

    monkeypatch.setattr(fdl.net, "read_range", fake)
    assert main(["wheels", "2.14.1", "--json"]) == 1  # the synthetic archs are not 2.14.1's
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["device_code"]["cubins"] == ["sm_75", "sm_90a", "sm_100f", "sm_120"]
    assert "default.archs" in [d["fact"] for d in entry["drift"]]
    assert main(["wheels", "2.14.1", "--json", "--metadata-only"]) in (0, 1)
    (entry,) = json.loads(capsys.readouterr().out)
    assert "device_code" not in entry


def test_stream_keeps_the_section_table_of_a_patchelfd_library(library: Path) -> None:
    """patchelf moves sections behind the section table (libtorch_cuda.so: 4.7 MB of them):
    the table is not in the stream's last MiB, and a container-like block after it is no
    GPU code."""
    decoy = build_fatbin([[FakeEntry("cubin", 37)]])
    data = library.read_bytes() + bytes(8) + decoy + bytes(3 << 20)
    code = scan_device_code(_chunks(data, 1 << 16))
    assert code.entries == read_device_code(library).entries
    assert "sm_37" not in code.counts()
