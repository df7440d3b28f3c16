"""A small reader of ELF shared libraries (64-bit little-endian), in pure Python.

It maps the file read-only and touches only what it needs: the file header, the section
headers and names, the dynamic section (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) and, for
:mod:`fdl.binaries.fatbin`, the ``.nv_fatbin`` section. A 500 MB library costs a few pages.

Malformed input raises :class:`BinaryFormatError` (a user-facing error), never a traceback.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from fdl.errors import EnvironmentProblem

__all__ = [
    "BinaryFormatError",
    "DynamicInfo",
    "ElfFile",
    "Section",
    "elf_machine",
    "is_elf",
    "needed",
    "read_dynamic",
    "rpath",
    "runpath",
    "soname",
]

_MAGIC = b"\x7fELF"
_HEADER = struct.Struct("<HHIQQQIHHHHHH")  # e_type .. e_shstrndx, after e_ident
_SECTION = struct.Struct("<IIQQQQIIQQ")
_PROGRAM = struct.Struct("<IIQQQQQQ")
_DYN = struct.Struct("<qQ")
SHT_NOBITS, SHT_DYNAMIC = 8, 6
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
_SHN_XINDEX = 0xFFFF


class BinaryFormatError(EnvironmentProblem):
    """A file is not a readable 64-bit little-endian ELF library, or is damaged."""


@dataclass(frozen=True)
class Section:
    """One section header: name, type and where its bytes are in the file."""

    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class DynamicInfo:
    """What the dynamic loader reads from a library.

    Attributes:
        needed: DT_NEEDED entries, in order (``libcudart.so.13``).
        soname: DT_SONAME, if any.
        rpath: DT_RPATH directories, unexpanded (``$ORIGIN/../lib``).
        runpath: DT_RUNPATH directories, unexpanded.
    """

    needed: tuple[str, ...] = ()
    soname: str | None = None
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()


class ElfFile:
    """An ELF file mapped read-only. Use as a context manager.

    Raises:
        BinaryFormatError: not ELF, not 64-bit little-endian, or truncated headers.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._map: mmap.mmap | None = None
        try:
            with self.path.open("rb") as handle:
                size = self.path.stat().st_size
                if size < 64:
                    raise self.error("too short to be an ELF file")
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise BinaryFormatError(
                f"cannot read {self.path}: {exc.strerror or exc}", hint="check the path"
            ) from None
        try:
            self._parse_header()
            self.sections = self._read_sections()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def data(self) -> mmap.mmap:
        """The mapped file (valid until :meth:`close`)."""
        if self._map is None:
            raise ValueError(f"{self.path} is closed")
        return self._map

    def error(self, why: str) -> BinaryFormatError:
        return BinaryFormatError(
            f"{self.path}: {why}", hint="expected a 64-bit little-endian ELF shared library"
        )

    # -- parsing ---------------------------------------------------------------------------

    def _unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        if offset < 0 or offset + fmt.size > len(self.data):
            raise self.error(f"truncated: {what} at offset {offset} is past the end of the file")
        return fmt.unpack_from(self.data, offset)

    def _parse_header(self) -> None:
        ident = self.data[:16]
        if ident[:4] != _MAGIC:
            raise self.error("not an ELF file")
        if ident[4] != 2 or ident[5] != 1:
            bits = {1: "32-bit", 2: "64-bit"}.get(ident[4], "unknown class")
            order = {1: "little-endian", 2: "big-endian"}.get(ident[5], "unknown byte order")
            raise self.error(f"{bits} {order} ELF is not supported")
        fields = self._unpack(_HEADER, 16, "ELF header")
        (self.type, self.machine, _, _, self.phoff, self.shoff, _, _, self.phentsize, self.phnum,
         self.shentsize, self.shnum, self.shstrndx) = fields  # fmt: skip

    def _read_sections(self) -> tuple[Section, ...]:
        if self.shoff == 0:
            return ()
        if self.shentsize < _SECTION.size:
            raise self.error(f"section header size {self.shentsize} is too small")
        first = self._unpack(_SECTION, self.shoff, "section header 0")
        count = self.shnum or first[5]  # extended numbering keeps the count in sh_size
        strndx = first[6] if self.shstrndx == _SHN_XINDEX else self.shstrndx
        if count * self.shentsize > len(self.data):
            raise self.error(f"{count} section headers do not fit in the file")
        raw = [self._unpack(_SECTION, self.shoff + i * self.shentsize, f"section header {i}")
               for i in range(count)]  # fmt: skip
        if not 0 <= strndx < count:
            raise self.error(f"section name table index {strndx} is out of range")
        names_at, names_size = raw[strndx][4], raw[strndx][5]
        self._check_range(names_at, names_size, "section name table")
        return tuple(
            Section(
                name=self._string(names_at, names_size, r[0]),
                type=r[1],
                offset=r[4],
                size=0 if r[1] == SHT_NOBITS else r[5],
                link=r[6],
                entsize=r[9],
            )
            for r in raw
        )

    def _check_range(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise self.error(
                f"truncated: {what} ({size} bytes at {offset}) is past the end of the file"
            )

    def _string(self, table: int, table_size: int, index: int) -> str:
        if index >= table_size:
            raise self.error(f"string index {index} is outside its table")
        start = table + index
        end = self.data.find(b"\0", start, table + table_size)
        if end < 0:
            raise self.error(f"unterminated string at offset {start}")
        return self.data[start:end].decode("utf-8", errors="replace")

    def section(self, name: str) -> Section | None:
        """The first section called ``name`` (``.nv_fatbin``), or None."""
        return next((s for s in self.sections if s.name == name), None)

    def section_range(self, section: Section) -> tuple[int, int]:
        """(start, end) file offsets of a section's bytes, checked against the file size."""
        self._check_range(section.offset, section.size, f"section {section.name}")
        return section.offset, section.offset + section.size

    # -- dynamic section -------------------------------------------------------------------

    def dynamic(self) -> DynamicInfo:
        """DT_NEEDED, DT_SONAME, DT_RPATH and DT_RUNPATH (empty for a static file)."""
        located = self._dynamic_from_sections() or self._dynamic_from_segments()
        if located is None:
            return DynamicInfo()
        entries, strtab, strsz = located
        values: dict[int, list[str]] = {DT_NEEDED: [], DT_SONAME: [], DT_RPATH: [], DT_RUNPATH: []}
        for tag, value in entries:
            if tag in values:
                values[tag].append(self._string(strtab, strsz, value))

        def paths(tag: int) -> tuple[str, ...]:
            return tuple(p for text in values[tag] for p in text.split(":") if p)

        return DynamicInfo(
            needed=tuple(values[DT_NEEDED]),
            soname=values[DT_SONAME][0] if values[DT_SONAME] else None,
            rpath=paths(DT_RPATH),
            runpath=paths(DT_RUNPATH),
        )

    def _entries(self, offset: int, size: int) -> list[tuple[int, int]]:
        self._check_range(offset, size, "dynamic section")
        result = []
        for at in range(offset, offset + size - _DYN.size + 1, _DYN.size):
            tag, value = _DYN.unpack_from(self.data, at)
            if tag == DT_NULL:
                break
            result.append((tag, value))
        return result

    def _dynamic_from_sections(self) -> tuple[list[tuple[int, int]], int, int] | None:
        dyn = next((s for s in self.sections if s.type == SHT_DYNAMIC), None)
        if dyn is None:
            return None
        if not 0 <= dyn.link < len(self.sections):
            raise self.error(f"dynamic section links to missing section {dyn.link}")
        strings = self.sections[dyn.link]
        self._check_range(strings.offset, strings.size, "dynamic string table")
        return self._entries(dyn.offset, dyn.size), strings.offset, strings.size

    def _dynamic_from_segments(self) -> tuple[list[tuple[int, int]], int, int] | None:
        """For files without section headers: PT_DYNAMIC and DT_STRTAB via PT_LOAD."""
        if self.phoff == 0 or self.phentsize < _PROGRAM.size:
            return None
        headers = [self._unpack(_PROGRAM, self.phoff + i * self.phentsize, f"program header {i}")
                   for i in range(self.phnum)]  # fmt: skip
        dynamic = next((h for h in headers if h[0] == PT_DYNAMIC), None)
        if dynamic is None:
            return None
        entries = self._entries(dynamic[2], dynamic[5])
        tags = dict(entries)
        if DT_STRTAB not in tags:
            raise self.error("dynamic segment has no string table")
        address = tags[DT_STRTAB]
        for h in headers:
            if h[0] == PT_LOAD and h[3] <= address < h[3] + h[5]:
                offset = h[2] + (address - h[3])
                size = tags.get(DT_STRSZ, len(self.data) - offset)
                self._check_range(offset, size, "dynamic string table")
                return entries, offset, size
        raise self.error("dynamic string table is outside every loaded segment")


def read_dynamic(path: Path | str) -> DynamicInfo:
    """The dynamic-loader view of a library (see :class:`DynamicInfo`)."""
    with ElfFile(path) as elf:
        return elf.dynamic()


def needed(path: Path | str) -> list[str]:
    """DT_NEEDED of a library, in order."""
    return list(read_dynamic(path).needed)


def runpath(path: Path | str) -> list[str]:
    """DT_RUNPATH directories of a library, unexpanded."""
    return list(read_dynamic(path).runpath)


def rpath(path: Path | str) -> list[str]:
    """DT_RPATH directories of a library, unexpanded."""
    return list(read_dynamic(path).rpath)


def soname(path: Path | str) -> str | None:
    """DT_SONAME of a library."""
    return read_dynamic(path).soname


def is_elf(path: Path | str) -> bool:
    """True when ``path`` is a 64-bit little-endian ELF file (cheap: reads 6 bytes)."""
    try:
        with Path(path).open("rb") as handle:
            return handle.read(6) == _MAGIC + b"\x02\x01"
    except OSError:
        return False


def elf_machine(path: Path | str) -> int | None:
    """The ELF header's ``e_machine`` (62: x86-64, 183: AArch64), of either class and byte
    order; None for what is no ELF file (a GNU ld script) or no regular file (a FIFO is
    never opened). Cheap: reads 20 bytes."""
    candidate = Path(path)
    try:
        if not candidate.is_file():
            return None
        with candidate.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return None
    if len(header) < 20 or header[:4] != _MAGIC:
        return None
    return int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
