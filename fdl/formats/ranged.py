"""Members of remote wheels, read with HTTP Range requests and kept in a cache.

A wheel is a zip: its central directory (:func:`fdl.archive.zip_members`) names each
member's place, so a member is read without the rest of the wheel. :class:`RangedReader`
fetches the byte ranges that hold the members wanted (:func:`fdl.archive.plan_spans`),
keeps them under ``<cache>/<wheel>/<start>-<length>`` for the next reader (a local
``file://`` wheel's are not kept), extracts the members with the zip's CRC-32 checked and,
where the wheel's ``RECORD`` names them, their sha256. :func:`member_chunks` streams one
member, inflated, in bounded memory.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fdl.archive import ArchiveError, Span, ZipMember, extract_span, plan_spans, zip_members
from fdl.errors import EnvironmentProblem, NetworkError
from fdl.formats.wheel import parse_wheel_name

if TYPE_CHECKING:  # fdl.net is imported where a range is read: refresh's readers need none
    from fdl.net import Progress

__all__ = ["DAMAGED_HINT", "SMALL", "RangedReader", "ReadRange", "RemoteWheel", "member_chunks"]

ReadRange = Callable[[str, int, int | None], tuple[bytes, int]]
ProgressCallback = Callable[[str, "Progress"], None]

SMALL = 16 << 20  # METADATA, version.py, RECORD: far smaller
_LOCAL = b"PK\x03\x04"
STORED, DEFLATED = 0, 8
_INFLATED = 1 << 20  # inflated bytes handed on at a time
DAMAGED_HINT = (
    "run the same command again (the damaged bytes were not kept); if it fails the same "
    "way, the index serves a damaged or altered wheel: pass another index (--index-url)"
)


@dataclass(frozen=True)
class RemoteWheel:
    """A wheel on an index (or a local ``file://`` one) whose members are read."""

    filename: str
    url: str
    sha256: str | None = None
    size: int | None = None

    @property
    def version(self) -> str:
        parsed = parse_wheel_name(self.filename)
        return parsed.version if parsed else ""


class RangedReader:
    """Reads members of remote wheels: directories, small members, and byte ranges kept
    in ``cache`` for the next reader.

    Attributes:
        bytes_read: Bytes received from the file host.
        bytes_cached: Bytes of byte ranges found in the cache instead.
    """

    def __init__(
        self,
        cache: Path,
        on_progress: ProgressCallback | None = None,
        *,
        damaged: str = DAMAGED_HINT,
        other: str = "pass another torch wheel",
    ) -> None:
        self.cache, self.on_progress = cache, on_progress
        self.damaged, self.other = damaged, other
        self.bytes_read = self.bytes_cached = 0

    def _read(self, url: str, start: int, length: int | None) -> tuple[bytes, int]:
        from fdl.net import read_range

        data, total = read_range(url, start, length)
        self.bytes_read += len(data)
        return data, total

    def members(self, wheel: RemoteWheel) -> dict[str, ZipMember]:
        """The wheel's members, from its zip directory."""
        return zip_members(wheel.url, self._read)

    def small(self, wheel: RemoteWheel, member: ZipMember) -> bytes:
        """A member of at most 16 MiB (METADATA, RECORD, version.py), read whole.

        Raises:
            EnvironmentProblem: it is larger.
        """
        if member.size > SMALL:
            raise EnvironmentProblem(
                f"{wheel.filename}: {member.name} is {member.size} bytes, not a metadata file",
                hint=self.other,
            )
        scratch = self.cache / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        out = scratch / hashlib.sha256(f"{wheel.url}:{member.name}".encode()).hexdigest()
        self.extract(wheel, [member], scratch, lambda _m: out.name, {})
        try:
            return out.read_bytes()
        finally:
            out.unlink(missing_ok=True)

    def extract(
        self,
        wheel: RemoteWheel,
        members: Iterable[ZipMember],
        root: Path,
        destination: Callable[[ZipMember], str],
        record: dict[str, tuple[str, int]],
    ) -> None:
        """Each member to ``root / destination(member)``, checked against the zip's CRC-32
        and, where ``record`` (:func:`fdl.formats.wheel.parse_record`) names it, its sha256.

        Raises:
            ArchiveError: a member that does not match (its bytes are not kept).
            NetworkError: the file host cannot be read.
        """
        # a local wheel's ranges are not kept: the file is at hand (a copy would only take
        # disk space), and one rebuilt under the same name must not be read from the cache
        local = wheel.url.startswith("file:")
        for span in plan_spans(members):
            data = self._span(wheel, span)
            try:
                extract_span(wheel.filename, span, data, lambda m: root / destination(m))
                for member in span.members:
                    expected = record.get(member.name)
                    if expected is not None:
                        self._check_record(wheel, member, root / destination(member), expected)
            except ArchiveError as exc:
                # not kept: the next run reads the range again instead of failing the same
                data.unlink(missing_ok=True)
                raise ArchiveError(exc.message, hint=self.damaged) from None
            finally:
                if local:
                    data.unlink(missing_ok=True)

    def _span(self, wheel: RemoteWheel, span: Span) -> Path:
        from fdl.locking import FileLock
        from fdl.net import fetch_range

        what = f"{wheel.filename} [{span.length / (1 << 20):.1f} MiB]"
        progress = self.on_progress

        def report(state: Progress) -> None:
            if progress is not None and span.length > (1 << 20):
                progress(what, state)

        if wheel.url.startswith("file:"):  # read for this reader alone, removed after it
            name = f"{os.getpid()}-{secrets.token_hex(4)}-{span.start}-{span.length}"
            data = self.cache / "scratch" / name
            self.bytes_read += fetch_range(
                wheel.url, data, span.start, span.length, on_progress=report
            )
            return data
        folder = self.cache / _safe_name(wheel.sha256 or wheel.filename)
        data = folder / f"{span.start}-{span.length}"
        if data.is_file() and data.stat().st_size == span.length:
            self.bytes_cached += span.length
            return data
        folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(folder / ".lock", purpose=f"reading {wheel.filename}")
        with lock:  # another reader of the same wheel finishes first, then we reuse it
            if data.is_file() and data.stat().st_size == span.length:
                self.bytes_cached += span.length
                return data
            self.bytes_read += fetch_range(
                wheel.url, data, span.start, span.length, on_progress=report
            )
        return data

    def _check_record(
        self, wheel: RemoteWheel, member: ZipMember, path: Path, expected: tuple[str, int]
    ) -> None:
        from fdl._files import file_sha256

        digest, size = expected
        if path.stat().st_size != size or file_sha256(path) != digest:
            raise ArchiveError(
                f"{wheel.filename}: {member.name} does not match the wheel's RECORD",
                hint=self.damaged,
            )


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", text)[:128]


def member_chunks(
    url: str, read: ReadRange, member: ZipMember, *, chunk: int = 8 << 20
) -> Iterator[bytes]:
    """The member's bytes, inflated, in pieces of at most 1 MiB; ``chunk`` compressed
    bytes are fetched per request.

    Raises:
        NetworkError: the local header is not where the directory says, the method is
            neither stored nor deflated, or the data does not inflate.
    """
    header, _ = read(url, member.local_offset, 30)
    if not header.startswith(_LOCAL):
        raise NetworkError(f"{url}: no local header for {member.name} at {member.local_offset}")
    name_len, extra_len = struct.unpack_from("<HH", header, 26)
    start = member.local_offset + 30 + name_len + extra_len
    if member.method not in (STORED, DEFLATED):
        raise NetworkError(f"{url}: {member.name} uses zip method {member.method}")
    inflate = zlib.decompressobj(-15) if member.method == DEFLATED else None
    done = 0
    while done < member.compressed:
        piece, _ = read(url, start + done, min(chunk, member.compressed - done))
        if not piece:
            raise NetworkError(f"{url}: {member.name} ends after {done} bytes")
        done += len(piece)
        if inflate is None:
            yield piece
            continue
        try:
            while piece:
                out = inflate.decompress(piece, _INFLATED)
                piece = inflate.unconsumed_tail
                if out:
                    yield out
        except zlib.error as exc:
            raise NetworkError(f"{url}: {member.name} does not inflate: {exc}") from None
    if inflate is not None:
        rest = inflate.flush()
        if rest:
            yield rest
