"""Tar archives: the same checks as zip, extraction through tarfile's ``data`` filter."""

from __future__ import annotations

import gzip
import shutil
import tarfile
import zlib
from collections.abc import Collection
from pathlib import Path

from fdl.archive._plan import (
    ArchiveError,
    Entry,
    Kind,
    Plan,
    check_sizes,
    file_mode,
    member_parts,
    plan_members,
    prefix_parts,
)
from fdl.archive._staging import ExtractResult, check_space, make_staging, publish
from fdl.errors import EnvironmentProblem

__all__ = ["TarMembers", "read_tar_members", "safe_extract_tar"]


def _kind(label: str, member: tarfile.TarInfo) -> Kind:
    if member.isdir():
        return Kind.DIR
    if member.isreg():
        return Kind.FILE
    if member.issym():
        return Kind.SYMLINK
    if member.islnk():
        return Kind.HARDLINK
    raise ArchiveError(
        f"{label}: refusing member {member.name!r}: special file (device, FIFO or socket)",
        hint="the archive is damaged or malicious; nothing was extracted",
    )


def _plan(
    label: str, members: list[tarfile.TarInfo], prefix: tuple[str, ...]
) -> tuple[Plan, dict[str, str]]:
    """The checked plan, and the new name of every member that is extracted."""

    def entry(member: tarfile.TarInfo, parts: tuple[str, ...]) -> Entry:
        kind = _kind(label, member)
        link = member.linkname
        if kind is Kind.HARDLINK:
            link_parts = member_parts(label, member.linkname)
            if link_parts[: len(prefix)] != prefix:
                outside = "/".join(prefix)
                raise ArchiveError(f"{label}: hard link {member.name!r} points outside {outside}/")
            link = "/".join(link_parts[len(prefix) :])
        return Entry(member.name, parts, kind, file_mode(member.mode), member.size, link)

    plan = plan_members(label, members, lambda member: member.name, prefix, entry)
    return plan, {entry.name: "/".join(entry.parts) for entry in plan.entries}


def _open_tar(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path)
    except (tarfile.TarError, OSError) as exc:
        raise ArchiveError(f"{path} is not a readable tar archive ({exc})") from None


def safe_extract_tar(
    path: Path | str,
    target: Path | str,
    *,
    strip_prefix: str | None = None,
    replace: bool = False,
) -> ExtractResult:
    """Extract a (possibly compressed) tar archive; same guarantees as ``safe_extract_zip``."""
    if not hasattr(tarfile, "data_filter"):
        raise EnvironmentProblem(
            "this Python lacks tarfile extraction filters",
            hint="use Python 3.10.12+, 3.11.4+ or newer",
        )
    path, target = Path(path), Path(target)
    label = str(path)
    prefix = prefix_parts(strip_prefix)
    with _open_tar(path) as archive:
        try:
            members = archive.getmembers()
        except (tarfile.TarError, EOFError) as exc:  # truncated, or a damaged header
            raise ArchiveError(f"{path} is not a complete tar archive ({exc})") from None
        plan, renamed = _plan(label, members, prefix)
        check_sizes(label, plan.total_bytes, path.stat().st_size)
        check_space(target.parent, plan.total_bytes, label)
        links = {entry.name: entry.link for entry in plan.entries if entry.kind is Kind.HARDLINK}

        def rename(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
            new_name = renamed.get(member.name)
            if new_name is None:
                return None
            linkname = links.get(member.name, member.linkname)
            moved = member.replace(name=new_name, linkname=linkname, deep=False)
            return tarfile.data_filter(moved, dest)

        staging = make_staging(target)
        try:
            chosen = [member for member in members if member.name in renamed]
            archive.extractall(staging, members=chosen, filter=rename)
            publish(staging, target, replace=replace)
        except (tarfile.TarError, EOFError, OSError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ArchiveError(f"{path}: extraction failed ({exc})") from None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    counts = {kind: sum(1 for entry in plan.entries if entry.kind is kind) for kind in Kind}
    dirs = {entry.parts[:depth] for entry in plan.entries for depth in range(1, len(entry.parts))}
    dirs |= {entry.parts for entry in plan.entries if entry.kind is Kind.DIR}
    return ExtractResult(
        target,
        counts[Kind.FILE] + counts[Kind.HARDLINK],
        len(dirs),
        counts[Kind.SYMLINK],
        plan.total_bytes,
        tuple(plan.skipped),
    )


class TarMembers(dict[str, bytes]):
    """Members read by :func:`read_tar_members`, and how many bytes of the archive that
    read (``bytes_read``: less than its size when the members came early)."""

    bytes_read: int = 0


def read_tar_members(
    path: Path | str,
    wanted: Collection[str],
    *,
    max_member: int = 4 << 20,
    max_archive: int = 64 << 20,
    max_unpacked: int = 256 << 20,
) -> TarMembers:
    """The content of the members ``wanted`` (full names: ``torch-sys-0.26.0/build.rs``)
    of a gzip tar archive such as a ``.crate``, read in one bounded pass without
    extracting anything; members absent from it are absent from the result.

    Every member name met is checked as extraction checks it (no absolute path, no ``..``);
    a wanted member must be a regular file of at most ``max_member`` bytes (a link is
    refused); the archive at most ``max_archive`` bytes, its unpacked stream at most
    ``max_unpacked`` (a decompression bomb stops there).

    Raises:
        ArchiveError: the archive is unreadable, truncated, unsafe or over a bound.
    """
    path = Path(path)
    label = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ArchiveError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if size > max_archive:
        raise ArchiveError(f"{path} is {size} bytes, more than the {max_archive} read")
    left = set(wanted)
    found = TarMembers()
    try:
        # gzip's own reader: tarfile's stream mode takes a truncated gzip for the end
        with (
            path.open("rb") as raw,
            gzip.GzipFile(fileobj=raw) as unpacked,
            tarfile.open(fileobj=unpacked, mode="r|") as archive,
        ):
            for member in archive:
                member_parts(label, member.name)
                if member.offset_data + member.size > max_unpacked:
                    raise ArchiveError(
                        f"{path} unpacks to more than {max_unpacked} bytes",
                        hint="the archive is damaged or malicious; nothing was read from it",
                    )
                if member.name not in left:
                    continue
                if not member.isreg():
                    raise ArchiveError(
                        f"{path}: member {member.name!r} is a link or special file, not a file",
                        hint="the archive is damaged or malicious; nothing was read from it",
                    )
                if member.size > max_member:
                    raise ArchiveError(
                        f"{path}: member {member.name!r} is {member.size} bytes, more than "
                        f"the {max_member} read"
                    )
                stream = archive.extractfile(member)
                data = stream.read(member.size) if stream is not None else b""
                if len(data) != member.size:
                    raise ArchiveError(f"{path}: member {member.name!r} is truncated")
                found[member.name] = data
                left.discard(member.name)
                if not left:
                    break
            else:
                # all of it was read: a truncated archive ends in EOFError here
                while unpacked.read(1 << 16):
                    if unpacked.tell() > max_unpacked:
                        raise ArchiveError(f"{path} unpacks to more than {max_unpacked} bytes")
            found.bytes_read = raw.tell()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise ArchiveError(
            f"{path} is not a complete tar archive ({exc})",
            hint="the archive is damaged; fetch it again",
        ) from None
    return found
