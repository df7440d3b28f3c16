"""The ELF/fatbin reader on synthetic libraries: archs, flags, dynamic section, bad input."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdl.binaries import (
    BinaryFormatError,
    ElfFile,
    is_elf,
    needed,
    parse_fatbin,
    read_device_code,
    read_dynamic,
    rpath,
    runpath,
    soname,
)
from fdl.binaries.synthetic import FakeEntry, build_elf, build_fatbin
from fdl.compat import Match, runs_on

COMPRESSED, ARCH_SPECIFIC, FAMILY = 0x8000, 0x100000, 0x200000


def _library(
    tmp_path: Path, containers: list[list[FakeEntry]], name: str = "libk.so", **dynamic: object
) -> Path:
    path = tmp_path / name
    path.write_bytes(
        build_elf({".text": b"\x90" * 24, ".nv_fatbin": build_fatbin(containers)}, **dynamic)
    )  # type: ignore[arg-type]
    return path


def test_lists_cubins_and_ptx_with_flags(tmp_path: Path) -> None:
    lib = _library(
        tmp_path,
        [
            [FakeEntry("cubin", 75), FakeEntry("cubin", 120), FakeEntry("ptx", 120, COMPRESSED)],
            # nvcc -shared adds a device-link container repeating the archs
            [
                FakeEntry("cubin", 75),
                FakeEntry("cubin", 90, ARCH_SPECIFIC),
                FakeEntry("cubin", 100, FAMILY),
            ],
        ],
    )
    code = read_device_code(lib)
    assert code.containers == 2
    assert code.cubin_archs == ("sm_75", "sm_90a", "sm_100f", "sm_120")
    assert code.ptx_archs == ("compute_120",)
    assert code.counts()["sm_75"] == 2
    ptx = next(e for e in code.entries if e.kind == 1)
    assert ptx.compressed and not ptx.arch_specific and not ptx.family
    assert code.summary() == "cubins sm_75 sm_90a sm_100f sm_120; PTX compute_120"
    assert runs_on(code.targets, "12.1").match is Match.COMPATIBLE


def test_primary_targets_leave_out_hand_picked_kernels(tmp_path: Path) -> None:
    main = [FakeEntry("cubin", 75), FakeEntry("cubin", 120)]
    lib = _library(tmp_path, [main, main, main, [*main, FakeEntry("cubin", 121, ARCH_SPECIFIC)]])
    code = read_device_code(lib)
    assert code.cubin_archs == ("sm_75", "sm_120", "sm_121a")
    assert code.primary_targets().codes() == ["sm_75", "sm_120"]


def test_library_without_device_code(tmp_path: Path) -> None:
    lib = tmp_path / "libplain.so"
    lib.write_bytes(build_elf({".text": b"\0" * 8}, needed=["libc.so.6"]))
    code = read_device_code(lib)
    assert not code.has_device_code and code.summary() == "no GPU code"


def test_padding_between_containers_is_skipped(tmp_path: Path) -> None:
    data = (
        build_fatbin([[FakeEntry("cubin", 61)]])
        + bytes(24)
        + build_fatbin([[FakeEntry("cubin", 120)]])
    )
    entries, containers = parse_fatbin(data)
    assert containers == 2 and [e.arch for e in entries] == [61, 120]


def test_dynamic_section(tmp_path: Path) -> None:
    lib = tmp_path / "libx.so"
    lib.write_bytes(
        build_elf(
            {".text": b"\0"},
            needed=["libcudart.so.13", "libc.so.6"],
            soname="libx.so",
            rpath=["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN"],
            runpath=["/opt/lib"],
        )
    )
    assert needed(lib) == ["libcudart.so.13", "libc.so.6"]
    assert soname(lib) == "libx.so"
    assert rpath(lib) == ["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN"]
    assert runpath(lib) == ["/opt/lib"]
    assert is_elf(lib)
    with ElfFile(lib) as elf:
        assert elf.section(".nv_fatbin") is None
        assert [s.name for s in elf.sections][1:] == [".text", ".dynstr", ".dynamic", ".shstrtab"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "too short"),
        (b"#!/bin/sh\necho hello\n" * 4, "not an ELF file"),
        (b"\x7fELF\x01\x01\x01" + bytes(80), "32-bit little-endian ELF is not supported"),
        (b"\x7fELF\x02\x02\x01" + bytes(80), "64-bit big-endian ELF is not supported"),
    ],
)
def test_not_a_64_bit_elf(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "libbad.so"
    path.write_bytes(content)
    with pytest.raises(BinaryFormatError, match=message) as caught:
        read_device_code(path)
    assert str(path) in caught.value.message and caught.value.hint
    assert not is_elf(path)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BinaryFormatError, match="cannot read"):
        read_dynamic(tmp_path / "nope.so")
    with pytest.raises(BinaryFormatError, match="cannot read"):
        read_dynamic(tmp_path)


def test_truncated_library(tmp_path: Path) -> None:
    whole = _library(tmp_path, [[FakeEntry("cubin", 75, payload=4096)]]).read_bytes()
    cut = tmp_path / "libcut.so"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(BinaryFormatError, match="truncated"):
        read_device_code(cut)


def test_damaged_fatbin_entry(tmp_path: Path) -> None:
    fatbin = bytearray(build_fatbin([[FakeEntry("cubin", 75)]]))
    struct.pack_into("<Q", fatbin, 16 + 8, 1 << 40)  # payload size far past the section
    with pytest.raises(BinaryFormatError, match="damaged fatbin"):
        parse_fatbin(bytes(fatbin), where="libk.so")


_VALID = build_elf(
    {".nv_fatbin": build_fatbin([[FakeEntry("cubin", 61), FakeEntry("ptx", 120, COMPRESSED)]])},
    needed=["libcudart.so.12"],
    soname="libk.so",
    runpath=["$ORIGIN"],
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8
    ),
    st.integers(1, len(_VALID)),
)
def test_mutated_bytes_never_escape_as_tracebacks(
    tmp_path: Path, edits: list[tuple[int, int]], length: int
) -> None:
    data = bytearray(_VALID[:length])
    for offset, value in edits:
        if offset < len(data):
            data[offset] = value
    path = tmp_path / "libmut.so"
    path.write_bytes(bytes(data))
    for read in (read_device_code, read_dynamic):
        try:
            read(path)
        except BinaryFormatError as exc:
            assert exc.message.startswith(str(path))
