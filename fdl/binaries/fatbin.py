"""Which GPU code a CUDA library contains, read from its ``.nv_fatbin`` section.

The section holds fatbin containers (little-endian, each at an 8-byte-aligned offset):

- container header, 16 bytes: u32 magic ``0xBA55ED50``, u16 version, u16 header size,
  u64 size of the entries that follow;
- each entry: u16 kind (1 = PTX, 2 = cubin) at 0x00, u32 entry header size at 0x04, u64
  payload size at 0x08, u32 arch at 0x1c (75, 120, ...), u64 flags at 0x28: 0x2000 payload
  compressed with LZ4 (``-compress-mode=speed``, and CUDA 11.x/12.x ``-compress-all``),
  0x8000 compressed with zstd (``default``/``size``/``balance`` modes of CUDA 12.8 on),
  0x100000 ``a`` target, 0x200000 ``f`` target. The next entry starts at entry + header
  size + payload size.

NVIDIA documents none of this (``fatbinary_section.h`` of the nvcc wheels only names the
sections and the ``0x466243B1`` wrapper of ``.nvFatBinSegment``); the layout and flags are
checked against ``cuobjdump`` on nvcc-built probes of every arch form and compression mode
(``tests/integration/test_fatbin_cuobjdump.py``). Each entry's target is what cuobjdump's
header dump prints as ``arch =`` (``sm_100f``); its ``--list-elf`` file names drop the
``f`` of family cubins (``libk.3.sm_100.cubin``), see :attr:`FatbinEntry.listed_as`.

Nothing is decompressed: listing archs needs only the headers. This lists what
``cuobjdump --list-elf/--list-ptx`` lists, without a CUDA toolkit.
"""

from __future__ import annotations

import mmap
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fdl.binaries.elf import BinaryFormatError, ElfFile
from fdl.compat.archs import ArchList, Capability, Kind, Target

__all__ = ["DeviceCode", "FatbinEntry", "parse_fatbin", "read_device_code"]

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTION = ".nv_fatbin"
KIND_PTX, KIND_CUBIN = 1, 2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_COMPRESSED = FLAG_LZ4 | FLAG_ZSTD
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQ")
_ARCH = struct.Struct("<I")
_FLAGS = struct.Struct("<Q")
_ENTRY_MIN = 0x30  # the flags field ends here
_MAGIC_BYTES = _CONTAINER.pack(FATBIN_MAGIC, 0, 0, 0)[:4]

Buffer = bytes | bytearray | mmap.mmap


@dataclass(frozen=True)
class FatbinEntry:
    """One piece of device code in a fatbin.

    Attributes:
        kind: 1 (PTX), 2 (cubin) or another raw kind number.
        arch: nvcc's arch number (75, 120).
        flags: The raw flags word.
        size: Payload size in bytes.
        container: Index of the container it was found in.
    """

    kind: int
    arch: int
    flags: int
    size: int
    container: int

    @property
    def capability(self) -> Capability:
        return Capability.from_number(self.arch)

    @property
    def compressed(self) -> bool:
        """True when the payload is compressed (LZ4 or zstd), as cuobjdump's ``compressed``."""
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def compression(self) -> str:
        """``"lz4"``, ``"zstd"`` or ``""`` (not compressed)."""
        return "zstd" if self.flags & FLAG_ZSTD else "lz4" if self.flags & FLAG_LZ4 else ""

    @property
    def arch_specific(self) -> bool:
        """An ``a`` target (sm_90a)."""
        return bool(self.flags & FLAG_ARCH_SPECIFIC)

    @property
    def family(self) -> bool:
        """An ``f`` target (sm_100f)."""
        return bool(self.flags & FLAG_FAMILY)

    @property
    def is_code(self) -> bool:
        """True for PTX and cubins (other kinds are listed but not interpreted)."""
        return self.kind in (KIND_PTX, KIND_CUBIN)

    @property
    def listed_as(self) -> str:
        """The arch in cuobjdump's ``--list-elf``/``--list-ptx`` file names: a family
        cubin is listed as ``sm_100`` (its ``arch =`` line says ``sm_100f``)."""
        if not self.is_code:
            return f"kind{self.kind}"
        suffix = "a" if self.arch_specific else "f" if self.family and self.kind == KIND_PTX else ""
        return f"sm_{self.arch}{suffix}"

    @property
    def target(self) -> Target:
        suffix = "a" if self.arch_specific else "f" if self.family else ""
        kind = Kind.PTX if self.kind == KIND_PTX else Kind.CUBIN
        return Target(self.capability, kind, suffix)


@dataclass(frozen=True)
class DeviceCode:
    """The GPU code found in one library.

    Attributes:
        path: The library.
        entries: Every fatbin entry, in file order.
        containers: How many fatbin containers the section holds.
    """

    path: Path
    entries: tuple[FatbinEntry, ...]
    containers: int

    @property
    def has_device_code(self) -> bool:
        return any(e.is_code for e in self.entries)

    @property
    def targets(self) -> ArchList:
        """The distinct targets (cubins and PTX) present."""
        return ArchList.of(e.target for e in self.entries if e.is_code)

    @property
    def cubin_archs(self) -> tuple[str, ...]:
        """``("sm_75", "sm_80", ...)``, sorted by capability."""
        return tuple(t.code for t in self.targets.cubins)

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        """``("compute_120",)``; empty when the library has no PTX."""
        return tuple(t.code for t in self.targets.ptx)

    def primary_targets(self) -> ArchList:
        """The targets the whole library was built for, without hand-picked extras.

        Large libraries add a few arch-specific kernels (libtorch 2.14.1: 475 kernels for each
        of sm_75 ... sm_120, plus 1 for sm_121a). A target counts as primary when it has at
        least half as many entries as the most common one.
        """
        counts = self.counts()
        if not counts:
            return ArchList()
        floor = max(counts.values()) / 2
        return ArchList.of(t for t in self.targets if counts[t.code] >= floor)

    def counts(self) -> dict[str, int]:
        """How many entries each target has (``{"sm_120": 2975, "sm_121a": 4}``)."""
        counter = Counter(e.target.code for e in self.entries if e.is_code)
        return {t.code: counter[t.code] for t in self.targets}

    def summary(self) -> str:
        """One line: ``cubins sm_75 sm_80; no PTX``."""
        if not self.has_device_code:
            return "no GPU code"
        cubins = " ".join(self.cubin_archs) or "none"
        ptx = " ".join(self.ptx_archs) or "no PTX"
        return f"cubins {cubins}; PTX {ptx}" if self.ptx_archs else f"cubins {cubins}; {ptx}"


def _malformed(where: str, offset: int, why: str) -> BinaryFormatError:
    return BinaryFormatError(
        f"{where}: damaged fatbin at offset {offset}: {why}",
        hint="the library may be truncated; re-extract or re-download it",
    )


def parse_fatbin(
    data: Buffer, start: int = 0, end: int | None = None, *, where: str = "fatbin"
) -> tuple[list[FatbinEntry], int]:
    """Parse the fatbin containers in ``data[start:end]``.

    Returns:
        (entries, number of containers).

    Raises:
        BinaryFormatError: a header points outside the section or is too small.
    """
    stop = len(data) if end is None else end
    entries: list[FatbinEntry] = []
    containers = 0
    offset = start
    while offset + _CONTAINER.size <= stop:
        found = data.find(_MAGIC_BYTES, offset, stop)
        if found < 0:
            break
        if (found - start) % 8:
            offset = found + 1  # the magic can only start 8-byte aligned
            continue
        _, _, header_size, size = _CONTAINER.unpack_from(data, found)
        body, body_end = found + header_size, found + header_size + size
        if header_size < _CONTAINER.size or body_end > stop:
            raise _malformed(where, found - start, "container runs past the section end")
        entries += _entries(data, body, body_end, containers, where=where, base=start)
        containers += 1
        offset = body_end + (-(body_end - start) % 8)
    return entries, containers


def _entries(
    data: Buffer, at: int, end: int, container: int, *, where: str, base: int
) -> list[FatbinEntry]:
    result = []
    while at + _ENTRY_MIN <= end:
        kind, _, header_size, size = _ENTRY.unpack_from(data, at)
        if header_size < _ENTRY_MIN or at + header_size + size > end:
            raise _malformed(where, at - base, f"entry header size {header_size}, payload {size}")
        (arch,) = _ARCH.unpack_from(data, at + 0x1C)
        (flags,) = _FLAGS.unpack_from(data, at + 0x28)
        result.append(FatbinEntry(kind, arch, flags, size, container))
        at += header_size + size
    return result


def read_device_code(path: Path | str) -> DeviceCode:
    """The GPU code in a library (empty when it has no ``.nv_fatbin`` section).

    Raises:
        BinaryFormatError: the file is not a 64-bit ELF or its fatbin is damaged.
    """
    with ElfFile(path) as elf:
        section = elf.section(FATBIN_SECTION)
        if section is None:
            return DeviceCode(elf.path, (), 0)
        start, end = elf.section_range(section)
        entries, containers = parse_fatbin(elf.data, start, end, where=str(elf.path))
        return DeviceCode(elf.path, tuple(entries), containers)
