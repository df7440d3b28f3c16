"""The GPU code of a library read as a stream of bytes, in bounded memory.

A library inside a wheel arrives as a deflate stream, front to back; its section headers
(which say where ``.nv_fatbin`` is) come last. So the scanner looks for fatbin containers
by their magic (``0xBA55ED50`` at an 8-byte-aligned file offset, version 1, a 16-byte
header), parses each container's entry headers as they pass and skips the payloads
without keeping them. It keeps the first 64 bytes (the ELF header), the section header
table with the MiB before it (where ``.shstrtab`` is; patchelf'd libraries such as
libtorch_cuda.so have more sections after the table) and the last MiB: at the end, the containers outside ``.nv_fatbin`` (a
magic that happened to appear in other data) are dropped. Memory stays at about one
chunk plus that MiB, whatever the library's size; the result equals
:func:`fdl.binaries.read_device_code` on the whole file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fdl.binaries.elf import _HEADER, _SECTION
from fdl.binaries.fatbin import (
    _ARCH,
    _CONTAINER,
    _ENTRY,
    _ENTRY_MIN,
    _FLAGS,
    _MAGIC_BYTES,
    FATBIN_SECTION,
    DeviceCode,
    FatbinEntry,
)

__all__ = ["FatbinScanner", "scan_device_code"]

_TAIL = 1 << 20
_ELF_HEAD = 64
_MAX_ENTRY_HEADER = 1 << 12  # nvcc writes 0x40-0x70; more is not an entry header


class FatbinScanner:
    """Feed a library's bytes in order with :meth:`feed`; :meth:`result` lists its code.

    Example::

        scanner = FatbinScanner("libtorch_cuda.so")
        for chunk in chunks:
            scanner.feed(chunk)
        code = scanner.result()
    """

    def __init__(self, name: str = "stream") -> None:
        self.name = name
        self.size = 0  # bytes fed so far
        self._buf = bytearray()
        self._base = 0  # file offset of self._buf[0]
        self._skip = 0  # payload bytes still to drop
        self._head = bytearray()
        self._tail = bytearray()
        self._container: tuple[int, int] | None = None  # (start, end) being parsed
        self._pending: list[FatbinEntry] = []
        self._found: list[tuple[int, list[FatbinEntry]]] = []  # (container start, entries)
        self._frozen: tuple[int, bytes] | None = None  # (offset, bytes) around the table

    def feed(self, chunk: bytes) -> None:
        """The next bytes of the library."""
        if len(self._head) < _ELF_HEAD:
            self._head += chunk[: _ELF_HEAD - len(self._head)]
        self._tail += chunk
        if len(self._tail) > 2 * _TAIL:
            del self._tail[: len(self._tail) - _TAIL]
        self.size += len(chunk)
        table = self._table_range()
        if self._frozen is None and table is not None and self.size >= table[1]:
            # patchelf appends sections after the table: keep it and the MiB before it
            self._frozen = (self.size - len(self._tail), bytes(self._tail))
        view = memoryview(chunk)
        if self._skip:
            dropped = min(self._skip, len(chunk))
            self._skip -= dropped
            self._base += dropped
            view = view[dropped:]
        self._buf += view
        self._run()

    def _run(self) -> None:
        buf = self._buf
        pos, more = 0, True
        while more:
            pos, more = self._entry(pos) if self._container is not None else self._scan(pos)
            if self._skip:
                dropped = min(self._skip, len(buf) - pos)
                self._skip -= dropped
                pos += dropped
                more = more and not self._skip
        del buf[:pos]
        self._base += pos

    def _scan(self, pos: int) -> tuple[int, bool]:
        """Find the next container header: (bytes consumed, whether to go on)."""
        buf = self._buf
        while True:
            found = buf.find(_MAGIC_BYTES, pos)
            if found < 0:  # keep what may be the start of a magic cut by the chunk's end
                return max(pos, len(buf) - len(_MAGIC_BYTES) + 1), False
            if (self._base + found) % 8:
                pos = found + 1
                continue
            if found + _CONTAINER.size > len(buf):
                return found, False
            _, version, header_size, size = _CONTAINER.unpack_from(buf, found)
            if version != 1 or header_size != _CONTAINER.size or size < _ENTRY_MIN:
                pos = found + 1
                continue
            start = self._base + found
            self._container = (start, start + header_size + size)
            self._pending = []
            return found + header_size, True

    def _entry(self, pos: int) -> tuple[int, bool]:
        """Read one entry header of the current container and skip its payload."""
        assert self._container is not None
        start, end = self._container
        here = self._base + pos
        if here + _ENTRY_MIN > end:  # the container is complete
            if self._pending:
                self._found.append((start, self._pending))
            self._container = None
            self._skip = max(0, end - here)
            return pos, True
        if pos + _ENTRY_MIN > len(self._buf):
            return pos, False
        kind, _, header_size, size = _ENTRY.unpack_from(self._buf, pos)
        if not _ENTRY_MIN <= header_size <= _MAX_ENTRY_HEADER or here + header_size + size > end:
            self._container = None  # a magic in other data, not a container: scan on
            return pos, True
        (arch,) = _ARCH.unpack_from(self._buf, pos + 0x1C)
        (flags,) = _FLAGS.unpack_from(self._buf, pos + 0x28)
        self._pending.append(FatbinEntry(kind, arch, flags, size, len(self._found)))
        self._skip = header_size + size
        return pos, True

    def result(self) -> DeviceCode:
        """The GPU code found, limited to the ``.nv_fatbin`` section when the stream was a
        64-bit ELF whose section names the scanner kept."""
        section = self._section_range()
        kept = [
            entries
            for start, entries in self._found
            if section is None or section[0] <= start < section[1]
        ]
        numbered = [
            FatbinEntry(e.kind, e.arch, e.flags, e.size, index)
            for index, entries in enumerate(kept)
            for e in entries
        ]
        return DeviceCode(Path(self.name), tuple(numbered), len(kept))

    def _table_range(self) -> tuple[int, int] | None:
        """Where the section header table is, from the ELF header (64-bit little-endian)."""
        head = self._head
        if len(head) < _ELF_HEAD or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        fields = _HEADER.unpack_from(head, 16)
        shoff, shentsize, shnum = fields[5], fields[10], fields[11]
        if shentsize != _SECTION.size or not shnum:
            return None
        return shoff, shoff + shnum * shentsize

    def _bytes(self, offset: int, size: int) -> bytes | None:
        """Bytes the scanner still holds (around the section table, or the last MiB)."""
        windows = [(self.size - len(self._tail), bytes(self._tail))]
        if self._frozen is not None:
            windows.insert(0, self._frozen)
        for start, data in windows:
            if start <= offset and offset + size <= start + len(data):
                return data[offset - start : offset - start + size]
        return None

    def _section_range(self) -> tuple[int, int] | None:
        table_range = self._table_range()
        if table_range is None:
            return None
        shstrndx = _HEADER.unpack_from(self._head, 16)[12]
        raw = self._bytes(table_range[0], table_range[1] - table_range[0])
        if raw is None:
            return None
        table = [_SECTION.unpack_from(raw, at) for at in range(0, len(raw), _SECTION.size)]
        if shstrndx >= len(table):
            return None
        strings = self._bytes(table[shstrndx][4], table[shstrndx][5])
        if strings is None:
            return None
        for name_at, _type, _flags, _addr, offset, size, *_ in table:
            name = strings[name_at : strings.find(b"\0", name_at)].decode("ascii", "replace")
            if name == FATBIN_SECTION:
                return offset, offset + size
        return (0, 0)  # an ELF without .nv_fatbin has no GPU code


def scan_device_code(chunks: Iterable[bytes], name: str = "stream") -> DeviceCode:
    """The GPU code of the library whose bytes ``chunks`` yields, in order."""
    scanner = FatbinScanner(name)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.result()
