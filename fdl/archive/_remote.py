"""Members of a zip that lies on a server: its central directory read with HTTP Range
requests, then only the spans of the file that hold the members wanted.

A wheel is a zip. Its central directory (at the end) gives each member's local header
offset, sizes and CRC-32; members are stored one after another, so the bytes of a member
end where the next member's local header starts. :func:`plan_spans` groups the wanted
members into a few contiguous byte ranges (members closer than ``gap`` share one), which
the caller fetches (``fdl.net.fetch_range``) into files; :func:`extract_span` then
inflates each member of a span from that file, checking its local header, its size and
its CRC-32, and writes it where the caller says.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from fdl.archive._plan import ArchiveError, member_parts

__all__ = [
    "MAX_DIRECTORY",
    "Span",
    "ZipMember",
    "extract_span",
    "plan_spans",
    "zip_members",
]

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]

MAX_DIRECTORY = 64 << 20  # a wheel's directory: torch's is ~2 MiB
_TAIL = 1 << 16
_EOCD, _EOCD64_LOCATOR, _CENTRAL, _LOCAL = (
    b"PK\x05\x06",
    b"PK\x06\x07",
    b"PK\x01\x02",
    b"PK\x03\x04",
)
STORED, DEFLATED = 0, 8
_PIECE = 1 << 20


@dataclass(frozen=True)
class ZipMember:
    """One file of a zip, as its central directory describes it.

    Attributes:
        end: Where the member's data ends at the latest: the next member's local header,
            or the central directory (0 when unknown).
    """

    name: str
    method: int
    compressed: int
    size: int
    local_offset: int
    crc32: int = 0
    end: int = 0


def _bad(url: str, why: str) -> ArchiveError:
    return ArchiveError(f"{url}: {why}", hint="is it a wheel? Download it again or pick another")


def zip_members(url: str, read: ReadRange) -> dict[str, ZipMember]:
    """The members of the zip at ``url``, from its central directory (zip64 aware).

    Raises:
        ArchiveError: not a zip, or a directory that contradicts itself or is too large.
        NetworkError: the file cannot be read.
    """
    tail, total = read(url, -_TAIL, None)
    at = tail.rfind(_EOCD)
    if at < 0 or at + 22 > len(tail):
        raise _bad(url, "no zip directory in its last 64 KiB")
    count, size, offset = struct.unpack_from("<HII", tail, at + 10)
    if 0xFFFFFFFF in (size, offset) or count == 0xFFFF:
        locator = tail.rfind(_EOCD64_LOCATOR, 0, at)
        if locator < 0 or locator + 16 > len(tail):
            raise _bad(url, "a zip64 directory without its locator")
        (record,) = struct.unpack_from("<Q", tail, locator + 8)
        zip64, _ = read(url, record, 56)
        if len(zip64) < 56:
            raise _bad(url, "a truncated zip64 directory record")
        size, offset = struct.unpack_from("<QQ", zip64, 40)
    if size > MAX_DIRECTORY or offset + size > total:
        raise _bad(url, f"a zip directory of {size} bytes at {offset} in a file of {total}")
    base = total - len(tail)
    directory = tail[offset - base : offset - base + size] if offset >= base else b""
    if len(directory) != size:
        directory, _ = read(url, offset, size)
    return _parse_directory(url, directory, offset)


def _parse_directory(url: str, directory: bytes, directory_offset: int) -> dict[str, ZipMember]:
    found: list[ZipMember] = []
    position = 0
    while directory.startswith(_CENTRAL, position):
        if position + 46 > len(directory):
            raise _bad(url, "a truncated zip directory")
        method, _, _, crc = struct.unpack_from("<HHHI", directory, position + 10)
        compressed, plain, name_len, extra_len, comment_len = struct.unpack_from(
            "<IIHHH", directory, position + 20
        )
        (local,) = struct.unpack_from("<I", directory, position + 42)
        name_at = position + 46
        name = directory[name_at : name_at + name_len].decode("utf-8", "replace")
        extra = directory[name_at + name_len : name_at + name_len + extra_len]
        plain, compressed, local = _zip64_sizes(extra, plain, compressed, local)
        found.append(ZipMember(name, method, compressed, plain, local, crc))
        position = name_at + name_len + extra_len + comment_len
    ends = sorted({m.local_offset for m in found} | {directory_offset})
    members: dict[str, ZipMember] = {}
    for member in found:
        after = bisect_right(ends, member.local_offset)
        end = ends[after] if after < len(ends) else directory_offset
        members[member.name] = replace(member, end=end)
    return members


def _zip64_sizes(extra: bytes, plain: int, compressed: int, local: int) -> tuple[int, int, int]:
    """Sizes and offset from the zip64 extra field, for the ones saturated at 0xFFFFFFFF."""
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, at)
        if tag == 1:
            values = list(
                struct.unpack_from(f"<{min(length, len(extra) - at - 4) // 8}Q", extra, at + 4)
            )
            if plain == 0xFFFFFFFF and values:
                plain = values.pop(0)
            if compressed == 0xFFFFFFFF and values:
                compressed = values.pop(0)
            if local == 0xFFFFFFFF and values:
                local = values.pop(0)
        at += 4 + length
    return plain, compressed, local


@dataclass(frozen=True)
class Span:
    """A contiguous byte range of the zip holding whole members."""

    start: int
    length: int
    members: tuple[ZipMember, ...]


def plan_spans(members: Iterable[ZipMember], *, gap: int = 1 << 20) -> list[Span]:
    """The byte ranges to fetch for ``members``: each member from its local header to where
    the next member starts; members less than ``gap`` bytes apart share a range."""
    spans: list[Span] = []
    current: list[ZipMember] = []
    start = end = 0
    for member in sorted(members, key=lambda m: m.local_offset):
        stop = member.end or member.local_offset + 30 + 0xFFFF * 2 + member.compressed
        if current and member.local_offset - end <= gap:
            current.append(member)
            end = max(end, stop)
            continue
        if current:
            spans.append(Span(start, end - start, tuple(current)))
        current, start, end = [member], member.local_offset, stop
    if current:
        spans.append(Span(start, end - start, tuple(current)))
    return spans


def extract_span(
    label: str,
    span: Span,
    data: Path,
    destination: Callable[[ZipMember], Path | None],
) -> int:
    """Inflate each member of ``span`` from ``data`` (the span's bytes) to
    ``destination(member)`` (None: skip it). Returns the bytes written.

    Raises:
        ArchiveError: a member's name leaves the target, its local header is not where the
            directory says, its method is neither stored nor deflated, or its bytes do not
            inflate to the size and CRC-32 the directory gives.
    """
    written = 0
    with data.open("rb") as handle:
        for member in span.members:
            target = destination(member)
            if target is None:
                continue
            member_parts(label, member.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                for piece in _member_bytes(label, handle, member.local_offset - span.start, member):
                    out.write(piece)
                    written += len(piece)
    return written


def _member_bytes(label: str, handle: BinaryIO, at: int, member: ZipMember) -> Iterator[bytes]:
    handle.seek(at)
    header = handle.read(30)
    if len(header) < 30 or not header.startswith(_LOCAL):
        raise _bad(label, f"no local header for {member.name} where the directory puts it")
    name_len, extra_len = struct.unpack_from("<HH", header, 26)
    named = handle.read(name_len).decode("utf-8", "replace")
    if named != member.name:
        raise _bad(
            label,
            f"the local header at {member.local_offset} names {named[:200]}, not {member.name}",
        )
    handle.seek(extra_len, 1)
    if member.method not in (STORED, DEFLATED):
        raise _bad(label, f"{member.name} uses zip method {member.method}")
    inflate = zlib.decompressobj(-15) if member.method == DEFLATED else None
    left, size, crc = member.compressed, 0, 0
    while left:
        piece = handle.read(min(_PIECE, left))
        if not piece:
            raise _bad(label, f"{member.name} ends {left} bytes early")
        left -= len(piece)
        while piece:
            try:  # never more than the size declared, and one byte: a bomb stops there
                out = inflate.decompress(piece, member.size - size + 1) if inflate else piece
            except zlib.error as exc:
                raise _bad(label, f"{member.name} does not inflate: {exc}") from None
            piece = inflate.unconsumed_tail if inflate is not None else b""
            size += len(out)
            if size > member.size:
                raise _bad(label, f"{member.name} inflates past its {member.size} bytes")
            crc = zlib.crc32(out, crc)
            yield out
    if inflate is not None:
        rest = inflate.flush()
        size += len(rest)
        crc = zlib.crc32(rest, crc)
        if rest:
            yield rest
    if size != member.size or crc != member.crc32:
        raise _bad(label, f"{member.name} inflated to {size} bytes with another CRC-32")
