"""The AMD GPU targets of a HIP library, read from its clang offload bundles: plain and
compressed (zlib, zstd; header versions 1-3), several bundles in one section, and damaged
or lying bundles refused with BinaryFormatError (never another exception, never a large
allocation)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdl.binaries.elf import BinaryFormatError
from fdl.binaries.offload import (
    BUNDLE_MAGIC,
    COMPRESSED_MAGIC,
    MAX_ENTRIES,
    parse_offload_bundles,
    read_offload_code,
)
from fdl.binaries.synthetic import build_elf, build_offload_bundle
from fdl.compat.rocm import gfx_sort_key

HOST = "host-x86_64-unknown-linux-gnu-"
TRIPLES = [
    HOST,
    "hipv4-amdgcn-amd-amdhsa--gfx1030",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx942",
]


def _library(tmp_path: Path, section: bytes, name: str = "libtorch_hip.so") -> Path:
    path = tmp_path / name
    path.write_bytes(build_elf({".hip_fatbin": section}))
    return path


def test_a_plain_bundle_lists_each_processor_and_its_features(tmp_path: Path) -> None:
    code = read_offload_code(_library(tmp_path, build_offload_bundle(TRIPLES)))
    assert code.bundles == 1
    assert code.archs == ("gfx90a", "gfx942", "gfx1030")
    assert [e.target_id for e in code.entries] == [
        "",
        "gfx1030",
        "gfx90a:sramecc+:xnack-",
        "gfx942",
    ]
    assert code.entries[0].is_host and code.entries[0].size == 0
    assert code.summary() == "gfx90a gfx942 gfx1030"


@pytest.mark.parametrize("compress", ["zlib", "zstd"])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_compressed_bundles_read_the_same(tmp_path: Path, compress: str, version: int) -> None:
    section = build_offload_bundle(TRIPLES, compress=compress, version=version)
    assert section.startswith(COMPRESSED_MAGIC)
    code = read_offload_code(_library(tmp_path, section))
    assert code.archs == ("gfx90a", "gfx942", "gfx1030")
    assert {e.compression for e in code.entries} == {compress}


def test_several_bundles_in_one_section_add_up(tmp_path: Path) -> None:
    first = build_offload_bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx90a"])
    second = build_offload_bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx1100"], compress="zstd")
    third = build_offload_bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx90a"], compress="zlib")
    section = first + bytes(-len(first) % 4096) + second + bytes(64) + third
    code = read_offload_code(_library(tmp_path, section))
    assert code.bundles == 3
    assert code.counts() == {"gfx90a": 2, "gfx1100": 1}


def test_a_library_without_the_section_has_no_gpu_code(tmp_path: Path) -> None:
    path = tmp_path / "libc10.so"
    path.write_bytes(build_elf({".rodata": b"x"}))
    code = read_offload_code(path)
    assert code.bundles == 0 and not code.has_device_code and code.summary() == "no GPU code"


def test_gfx_names_sort_by_generation() -> None:
    names = ["gfx1201", "gfx90a", "gfx1030", "gfx908", "gfx942", "gfx1100", "gfx950"]
    assert sorted(names, key=gfx_sort_key) == [
        "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1201"
    ]  # fmt: skip


def _lying(count: int = 1, offset: int = 4096, size: int = 64, length: int = 20) -> bytes:
    return BUNDLE_MAGIC + struct.pack("<Q", count) + struct.pack("<QQQ", offset, size, length)


@pytest.mark.parametrize(
    ("section", "why"),
    [
        (BUNDLE_MAGIC, "no entry table"),
        (_lying(count=MAX_ENTRIES + 1), "entries"),
        (_lying(count=2**63), "entries"),
        (_lying(length=2**40), "target triple of"),
        (_lying(length=8) + b"hipv4-am", "runs past the end"),
        (_lying(length=4) + b"\x1b[2J", "not text"),
        (build_offload_bundle(TRIPLES)[:200], "runs past"),
        (COMPRESSED_MAGIC + b"\x02\x00", "cut short"),
        (COMPRESSED_MAGIC + struct.pack("<HH", 9, 0) + bytes(24), "version 9"),
        (COMPRESSED_MAGIC + struct.pack("<HHIIQ", 2, 7, 24, 10, 0), "method 7"),
        (COMPRESSED_MAGIC + struct.pack("<HHIIQ", 2, 0, 2**31, 10, 0), "compressed size"),
        (COMPRESSED_MAGIC + struct.pack("<HHIIQ", 2, 0, 30, 10, 0) + b"garbag", "inflate"),
        (COMPRESSED_MAGIC + struct.pack("<HHQQQ", 3, 1, 36, 10, 0) + b"junk", "inflate"),
    ],
)
def test_a_damaged_or_lying_bundle_is_refused(tmp_path: Path, section: bytes, why: str) -> None:
    path = _library(tmp_path, section)
    with pytest.raises(BinaryFormatError, match="damaged offload bundle") as caught:
        read_offload_code(path)
    assert why in caught.value.message and str(path) in caught.value.message


def test_a_bomb_is_read_only_as_far_as_its_entry_table(tmp_path: Path) -> None:
    """A compressed bundle claiming 1 GiB: only the head is inflated."""
    import zlib

    bundle = build_offload_bundle(TRIPLES) + bytes(1 << 26)
    payload = zlib.compress(bundle, 9)
    header = COMPRESSED_MAGIC + struct.pack("<HHIIQ", 2, 0, 24 + len(payload), 1 << 30, 0)
    code = read_offload_code(_library(tmp_path, header + payload))
    assert code.archs == ("gfx90a", "gfx942", "gfx1030")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=120))
def test_any_bytes_end_in_entries_or_the_format_error(noise: bytes, cut: int) -> None:
    good = build_offload_bundle(TRIPLES[:2], code_size=8)
    for data in (noise, BUNDLE_MAGIC + noise, COMPRESSED_MAGIC + noise, good[:cut] + noise):
        try:
            entries, _ = parse_offload_bundles(data)
        except BinaryFormatError:
            continue
        assert all(e.triple.isprintable() for e in entries)
