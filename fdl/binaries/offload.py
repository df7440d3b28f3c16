"""Which AMD GPU targets a HIP library contains, read from its ``.hip_fatbin`` section.

The section holds clang offload bundles, one after another (each 4096-byte aligned as
the linker places them, but read here wherever the magic is found):

- an uncompressed bundle: the 24-byte magic ``__CLANG_OFFLOAD_BUNDLE__``, u64 number of
  entries, then per entry u64 offset (from the bundle's start), u64 size, u64 length of
  the target triple and the triple itself (``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-``;
  ``host-x86_64-unknown-linux-gnu-`` for the empty host entry);
- a compressed bundle (``clang-offload-bundler --compress``, PyTorch's ROCm builds): the
  magic ``CCOB``, u16 version, u16 method (0 zlib, 1 zstd), then version 1: u32
  uncompressed size, u64 hash; version 2: u32 total size, u32 uncompressed size, u64
  hash; version 3: u64 total size, u64 uncompressed size, u64 hash; then the compressed
  uncompressed bundle.

The layout is clang's (``clang/lib/Driver/OffloadBundler.cpp``: ``OffloadBundleMagicStr``,
``RawCompressedBundleHeader``); tests check it against code objects built by Debian's
``hipcc`` (``tests/integration/test_offload_hipcc.py``). Only the bundle's entry table is
decompressed (a few KiB at most, bounded): listing targets needs no code object.
zstd needs the ``zstandard`` module (``pip install 'fdl[zstd]'``); zlib is the stdlib's.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fdl.binaries.elf import BinaryFormatError, ElfFile
from fdl.compat.rocm import gfx_processor, gfx_sort_key

__all__ = ["OffloadCode", "OffloadEntry", "parse_offload_bundles", "read_offload_code"]

OFFLOAD_SECTION = ".hip_fatbin"
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
_COUNT = struct.Struct("<Q")
_ENTRY = struct.Struct("<QQQ")
_COMMON = struct.Struct("<4sHH")
# version -> (header layout after the common fields, whether it carries the total size)
_COMPRESSED_HEADERS = {
    1: (struct.Struct("<IQ"), False),
    2: (struct.Struct("<IIQ"), True),
    3: (struct.Struct("<QQQ"), True),
}
METHOD_ZLIB, METHOD_ZSTD = 0, 1
# An entry table of more than this is not a bundle clang writes (libtorch_hip.so's have
# one entry per target plus the host: about 13).
MAX_ENTRIES = 4096
MAX_TRIPLE = 1024
# What is inflated of a compressed bundle to read its entry table: the table comes first.
TABLE_BYTES = 32 + MAX_ENTRIES * 64

Buffer = bytes | bytearray | mmap.mmap


@dataclass(frozen=True)
class OffloadEntry:
    """One entry of an offload bundle.

    Attributes:
        triple: The bundle entry's id (``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-``).
        size: The code object's size in bytes (0 for the host entry).
        bundle: Index of the bundle it was found in.
        compression: ``"zlib"``, ``"zstd"`` or ``""``: how its bundle was stored.
    """

    triple: str
    size: int
    bundle: int
    compression: str = ""

    @property
    def is_host(self) -> bool:
        return self.triple.startswith("host-")

    @property
    def target_id(self) -> str:
        """``gfx90a:xnack-``: the part after the triple (``""`` for the host)."""
        if self.is_host:
            return ""
        parts = self.triple.split("-", 4)
        return parts[4].lstrip("-") if len(parts) == 5 else ""

    @property
    def arch(self) -> str:
        """``gfx90a``: the processor, without target features (``""`` when none)."""
        return gfx_processor(self.target_id)


@dataclass(frozen=True)
class OffloadCode:
    """The AMD GPU code found in one library.

    Attributes:
        path: The library.
        entries: Every bundle entry, in file order (host entries included).
        bundles: How many bundles the section holds.
    """

    path: Path
    entries: tuple[OffloadEntry, ...]
    bundles: int

    @property
    def has_device_code(self) -> bool:
        return any(e.arch for e in self.entries)

    @property
    def archs(self) -> tuple[str, ...]:
        """``("gfx1030", "gfx90a", ...)``: the distinct processors, in the order of
        :func:`gfx_sort_key`."""
        return tuple(sorted({e.arch for e in self.entries if e.arch}, key=gfx_sort_key))

    def counts(self) -> dict[str, int]:
        """How many code objects each processor has."""
        counter = Counter(e.arch for e in self.entries if e.arch)
        return {arch: counter[arch] for arch in self.archs}

    def summary(self) -> str:
        """One line: ``gfx90a gfx1030`` or ``no GPU code``."""
        return " ".join(self.archs) if self.archs else "no GPU code"


def _malformed(where: str, offset: int, why: str) -> BinaryFormatError:
    return BinaryFormatError(
        f"{where}: damaged offload bundle at offset {offset}: {why}",
        hint="the library may be truncated; re-extract or re-download it",
    )


def parse_offload_bundles(
    data: Buffer, start: int = 0, end: int | None = None, *, where: str = "offload bundle"
) -> tuple[list[OffloadEntry], int]:
    """Parse the offload bundles in ``data[start:end]``.

    Returns:
        (entries, number of bundles).

    Raises:
        BinaryFormatError: an entry table or a compressed header points outside the
            section, lies about its sizes, or cannot be inflated.
    """
    stop = len(data) if end is None else end
    entries: list[OffloadEntry] = []
    bundles = 0
    offset = start
    # where each magic next occurs at or after `offset` (-1: nowhere): each is searched for
    # again only once passed, so a section of many bundles of one kind is scanned once
    plain: int | None = None
    packed: int | None = None
    while offset < stop:
        if plain is None or -1 < plain < offset:
            plain = data.find(BUNDLE_MAGIC, offset, stop)
        if packed is None or -1 < packed < offset:
            packed = data.find(COMPRESSED_MAGIC, offset, stop)
        found = min(x for x in (plain, packed) if x >= 0) if max(plain, packed) >= 0 else -1
        if found < 0:
            break
        if found == plain:
            table, next_offset = _table(data, found, stop, where=where, base=start)
            entries += [OffloadEntry(t, s, bundles) for t, s in table]
        else:
            compression, inflated, next_offset = _inflate(data, found, stop, where, start)
            table, _ = _table(inflated, 0, len(inflated), where=where, base=0, partial=True)
            entries += [OffloadEntry(t, s, bundles, compression) for t, s in table]
        bundles += 1
        offset = max(next_offset, found + 1)
    return entries, bundles


def _table(
    data: Buffer, at: int, stop: int, *, where: str, base: int, partial: bool = False
) -> tuple[list[tuple[str, int]], int]:
    """The ``(triple, size)`` entries of the uncompressed bundle at ``at``, and where the
    bundle ends. ``partial``: ``data`` holds the table but not the code objects."""
    head = at + len(BUNDLE_MAGIC)
    if data[at : at + len(BUNDLE_MAGIC)] != BUNDLE_MAGIC or head + _COUNT.size > stop:
        raise _malformed(where, at - base, "no entry table after the magic")
    (count,) = _COUNT.unpack_from(data, head)
    if count > MAX_ENTRIES:
        raise _malformed(where, at - base, f"{count} entries (at most {MAX_ENTRIES})")
    cursor, end, table = head + _COUNT.size, at, []
    for _ in range(count):
        if cursor + _ENTRY.size > stop:
            raise _malformed(where, at - base, "the entry table runs past the section end")
        offset, size, length = _ENTRY.unpack_from(data, cursor)
        cursor += _ENTRY.size
        if length > MAX_TRIPLE or cursor + length > stop:
            raise _malformed(where, at - base, f"a target triple of {length} bytes")
        triple = bytes(data[cursor : cursor + length]).decode("ascii", "replace")
        cursor += length
        if not triple.isprintable():
            raise _malformed(where, at - base, "a target triple that is not text")
        if not partial and (offset > stop - at or size > stop - at - offset):
            raise _malformed(where, at - base, f"{triple}: its code object runs past the end")
        table.append((triple, size))
        end = max(end, at + offset + size)
    return table, max(end, cursor)


def _inflate(data: Buffer, at: int, stop: int, where: str, base: int) -> tuple[str, bytes, int]:
    """The first :data:`TABLE_BYTES` of the compressed bundle at ``at``, how it was
    compressed, and where it ends."""
    if at + _COMMON.size > stop:
        raise _malformed(where, at - base, "a compressed header cut short")
    _, version, method = _COMMON.unpack_from(data, at)
    layout = _COMPRESSED_HEADERS.get(version)
    if layout is None:
        raise _malformed(where, at - base, f"compressed bundle version {version}")
    fields, sized = layout
    header_end = at + _COMMON.size + fields.size
    if header_end > stop:
        raise _malformed(where, at - base, "a compressed header cut short")
    values = fields.unpack_from(data, at + _COMMON.size)
    total = values[0] if sized else stop - at
    if total < header_end - at or total > stop - at:
        raise _malformed(where, at - base, f"a compressed size of {total} bytes")
    # the entry table is at the start of the inflated bundle: a bounded prefix of the
    # compressed bytes holds it (the whole payload is never copied)
    payload = bytes(data[header_end : min(at + total, header_end + TABLE_BYTES)])
    if method == METHOD_ZLIB:
        compression, inflated = "zlib", _zlib_head(payload, where, at - base)
    elif method == METHOD_ZSTD:
        compression, inflated = "zstd", _zstd_head(payload, where, at - base)
    else:
        raise _malformed(where, at - base, f"compression method {method}")
    # Without a total size (version 1) the next bundle is found by its magic.
    return compression, inflated, at + total if sized else header_end


def _zlib_head(payload: bytes, where: str, offset: int) -> bytes:
    try:
        return zlib.decompressobj().decompress(payload, TABLE_BYTES)
    except zlib.error as exc:
        raise _malformed(where, offset, f"zlib data that does not inflate ({exc})") from None


def _zstd_head(payload: bytes, where: str, offset: int) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise BinaryFormatError(
            f"{where}: its GPU code is zstd-compressed and the zstandard module is missing",
            hint="pip install 'fdl[zstd]' (or pip install zstandard), then run it again",
        ) from None
    try:
        # bounded: a stream read of the table's size, never the whole (maybe huge) bundle
        return bytes(_zstd_decompressor().stream_reader(payload).read(TABLE_BYTES))
    except zstandard.ZstdError as exc:
        raise _malformed(where, offset, f"zstd data that does not inflate ({exc})") from None


@cache
def _zstd_decompressor() -> Any:
    import zstandard

    return zstandard.ZstdDecompressor()


def read_offload_code(path: Path | str) -> OffloadCode:
    """The AMD GPU code in a library (empty when it has no ``.hip_fatbin`` section).

    Raises:
        BinaryFormatError: the file is not a 64-bit ELF or its bundles are damaged.
    """
    with ElfFile(path) as elf:
        section = elf.section(OFFLOAD_SECTION)
        if section is None:
            return OffloadCode(elf.path, (), 0)
        start, end = elf.section_range(section)
        entries, bundles = parse_offload_bundles(elf.data, start, end, where=str(elf.path))
        return OffloadCode(elf.path, tuple(entries), bundles)
