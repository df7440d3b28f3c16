"""Small synthetic ELF libraries and fatbins, for tests that have no CUDA toolkit.

The files are valid for :mod:`fdl.binaries` (and for ``readelf``): an ELF64 header, the
given sections, an optional dynamic section, and the section header table.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fdl.binaries.fatbin import FATBIN_MAGIC, KIND_CUBIN, KIND_PTX

__all__ = ["FakeEntry", "build_elf", "build_fatbin", "build_offload_bundle"]

_ENTRY_HEADER = 0x40


@dataclass(frozen=True)
class FakeEntry:
    """One fatbin entry to write: ``FakeEntry("cubin", 120)``, ``FakeEntry("ptx", 120, 0x8000)``."""

    kind: str
    arch: int
    flags: int = 0
    payload: int = 16

    @property
    def kind_number(self) -> int:
        return {"cubin": KIND_CUBIN, "ptx": KIND_PTX}.get(self.kind, 0) or int(self.kind)


def build_fatbin(containers: Sequence[Sequence[FakeEntry]]) -> bytes:
    """Fatbin containers, each starting 8-byte aligned."""
    out = bytearray()
    for entries in containers:
        body = bytearray()
        for entry in entries:
            header = bytearray(_ENTRY_HEADER)
            struct.pack_into("<HHIQ", header, 0, entry.kind_number, 0, _ENTRY_HEADER, entry.payload)
            struct.pack_into("<I", header, 0x1C, entry.arch)
            struct.pack_into("<Q", header, 0x28, entry.flags)
            body += header + bytes(entry.payload)
        out += struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body
        out += bytes(-len(out) % 8)
    return bytes(out)


def _strtab(names: Iterable[str]) -> tuple[bytes, dict[str, int]]:
    table = bytearray(b"\0")
    index: dict[str, int] = {"": 0}
    for name in names:
        if name not in index:
            index[name] = len(table)
            table += name.encode() + b"\0"
    return bytes(table), index


def _dynamic(
    needed: Sequence[str], soname: str | None, rpath: Sequence[str], runpath: Sequence[str]
) -> tuple[bytes, bytes]:
    strings = [*needed, *([soname] if soname else []), ":".join(rpath), ":".join(runpath)]
    table, index = _strtab(s for s in strings if s)
    entries = [(1, index[n]) for n in needed]
    if soname:
        entries.append((14, index[soname]))
    if rpath:
        entries.append((15, index[":".join(rpath)]))
    if runpath:
        entries.append((29, index[":".join(runpath)]))
    entries.append((0, 0))
    return table, b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)


def build_elf(
    sections: Mapping[str, bytes] | None = None,
    *,
    needed: Sequence[str] = (),
    soname: str | None = None,
    rpath: Sequence[str] = (),
    runpath: Sequence[str] = (),
) -> bytes:
    """A 64-bit little-endian ELF shared object with ``sections`` (name -> bytes) and, when
    any of needed/soname/rpath/runpath is given, a ``.dynamic`` section."""
    parts: list[tuple[str, int, bytes, int]] = [
        (name, 1, data, 0) for name, data in (sections or {}).items()
    ]
    if needed or soname or rpath or runpath:
        dynstr, dynamic = _dynamic(needed, soname, rpath, runpath)
        parts.append((".dynstr", 3, dynstr, 0))
        parts.append((".dynamic", 6, dynamic, len(parts) - 1))  # link: .dynstr (+1 below)
    shstrtab, names = _strtab([*(p[0] for p in parts), ".shstrtab"])
    parts.append((".shstrtab", 3, shstrtab, 0))
    body = bytearray(64)
    headers = [bytes(64)]  # the null section
    for name, kind, data, link in parts:
        body += bytes(-len(body) % 8)
        offset = len(body)
        body += data
        link_index = link + 1 if kind == 6 else 0
        entsize = 16 if kind == 6 else 0
        headers.append(
            struct.pack(
                "<IIQQQQIIQQ", names[name], kind, 0, 0, offset, len(data), link_index, 0, 8, entsize
            )
        )
    body += bytes(-len(body) % 8)
    shoff = len(body)
    body += b"".join(headers)
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    header = struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, len(headers), len(headers) - 1
    )
    body[:64] = ident + header
    return bytes(body)


def build_offload_bundle(
    triples: Sequence[str], *, code_size: int = 64, compress: str = "", version: int = 2
) -> bytes:
    """A clang offload bundle of ``triples`` (each with ``code_size`` bytes of code; the
    ``host-`` entry empty), optionally compressed as ``clang-offload-bundler --compress``
    does (``compress``: ``"zlib"`` or ``"zstd"``; ``version``: its header layout 1-3)."""
    from fdl.binaries.offload import BUNDLE_MAGIC, COMPRESSED_MAGIC, METHOD_ZLIB, METHOD_ZSTD

    sizes = [0 if t.startswith("host-") else code_size for t in triples]
    table_size = len(BUNDLE_MAGIC) + 8 + sum(24 + len(t) for t in triples)
    offset = table_size + (-table_size % 4096)
    table = bytearray(BUNDLE_MAGIC + struct.pack("<Q", len(triples)))
    codes = bytearray()
    for triple, size in zip(triples, sizes, strict=True):
        table += struct.pack("<QQQ", offset + len(codes) if size else 0, size, len(triple))
        table += triple.encode()
        codes += bytes([0x7F]) * size
    bundle = bytes(table + bytes(offset - len(table)) + codes)
    if not compress:
        return bundle
    import zlib

    if compress == "zlib":
        method, payload = METHOD_ZLIB, zlib.compress(bundle)
    else:
        import zstandard

        method, payload = METHOD_ZSTD, zstandard.ZstdCompressor().compress(bundle)
    common = COMPRESSED_MAGIC + struct.pack("<HH", version, method)
    if version == 1:
        return common + struct.pack("<IQ", len(bundle), 0) + payload
    if version == 2:
        return common + struct.pack("<IIQ", 24 + len(payload), len(bundle), 0) + payload
    return common + struct.pack("<QQQ", 32 + len(payload), len(bundle), 0) + payload
