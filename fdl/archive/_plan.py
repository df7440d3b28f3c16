"""What an archive would create, checked before anything is written.

Every member name is reduced to path components below the target; a member
is refused when it is absolute, names a drive, climbs with ``..``, is a
device, FIFO or socket, would be written through a symlink, or is a symlink
that resolves outside the target (following the archive's other symlinks the
way the kernel would).
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from fdl.errors import FdlError

__all__ = [
    "MAX_UNPACKED_BYTES",
    "ArchiveError",
    "Entry",
    "Kind",
    "Plan",
    "check_plan",
    "check_sizes",
    "member_parts",
    "plan_members",
    "prefix_parts",
]

_DRIVE = re.compile(r"^[A-Za-z]:")
# Limits of the file system (PATH_MAX, NAME_MAX) and a depth no real archive reaches:
# refused by name before anything is created, instead of failing half-way (ENAMETOOLONG,
# or a RecursionError in mkdir).
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_DEPTH = 256
# The largest real libtorch archive unpacks to a few GB; a bomb declares far more, or far
# more than its own size. Checked on the declared sizes before anything is read.
MAX_UNPACKED_BYTES = 32 << 30
MAX_RATIO = 100
RATIO_FLOOR = 256 << 20  # below this, small archives may compress as well as they like
# The kernel gives up on symlink chains after 40 hops (ELOOP); so do we.
_MAX_HOPS = 40
_Member = TypeVar("_Member")


class ArchiveError(FdlError):
    """An archive is corrupt, unsafe, or not what was expected."""


class Kind(Enum):
    DIR = "dir"
    FILE = "file"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"


@dataclass(frozen=True)
class Entry:
    """One member as it will land under the target.

    Attributes:
        name: The member's name in the archive (for messages).
        parts: Its path below the target, as components.
        kind: What it creates.
        mode: Permission bits to give a file (0o644 or 0o755).
        size: Uncompressed bytes (files).
        link: Symlink target (as stored), or the hardlink's target parts joined by '/'.
    """

    name: str
    parts: tuple[str, ...]
    kind: Kind
    mode: int = 0o644
    size: int = 0
    link: str = ""


@dataclass
class Plan:
    """The checked list of entries, and what was left out."""

    entries: list[Entry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.entries if entry.kind is Kind.FILE)


def _refuse(archive: str, name: str, why: str) -> ArchiveError:
    return ArchiveError(
        f"{archive}: refusing member {name!r}: {why}",
        hint="the archive is damaged or malicious; nothing was extracted. Download it again "
        "from a trusted source",
    )


def member_parts(archive: str, name: str) -> tuple[str, ...]:
    """The path components of a member name, refusing names that leave the target."""
    if "\x00" in name:
        raise _refuse(archive, name, "NUL character in the name")
    if "\\" in name:
        raise _refuse(archive, name, "backslash in the name (Windows path separator)")
    if name.startswith("/"):
        raise _refuse(archive, name, "absolute path")
    if _DRIVE.match(name):
        raise _refuse(archive, name, "drive letter in the path")
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_PATH_BYTES:
        raise _refuse(
            archive,
            name[:80] + "...",
            f"path of {len(encoded)} bytes (the limit is {MAX_PATH_BYTES})",
        )
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise _refuse(archive, name, "'..' in the path")
    if len(parts) > MAX_DEPTH:
        raise _refuse(
            archive, name[:80] + "...", f"{len(parts)} directory levels (the limit is {MAX_DEPTH})"
        )
    for part in parts:
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise _refuse(archive, name[:80] + "...", f"a name longer than {MAX_NAME_BYTES} bytes")
    return parts


def check_sizes(archive: str, declared: int, archive_bytes: int) -> None:
    """Refuse an archive whose declared content is larger than any libtorch, or expands
    far beyond its own size (a decompression bomb), before anything is decompressed."""
    if declared > MAX_UNPACKED_BYTES:
        raise ArchiveError(
            f"{archive} declares {declared / 2**30:.1f} GiB of content, more than any libtorch "
            f"(the limit is {MAX_UNPACKED_BYTES / 2**30:.0f} GiB)",
            hint="the archive is damaged or malicious; nothing was extracted. Download it "
            "again from a trusted source",
        )
    if declared > RATIO_FLOOR and archive_bytes > 0 and declared > MAX_RATIO * archive_bytes:
        raise ArchiveError(
            f"{archive} would expand {declared // max(archive_bytes, 1)}-fold "
            f"({archive_bytes} bytes to {declared / 2**30:.1f} GiB): a decompression bomb",
            hint="the archive is damaged or malicious; nothing was extracted. Download it "
            "again from a trusted source",
        )


def prefix_parts(strip_prefix: str | None) -> tuple[str, ...]:
    """``strip_prefix`` ('libtorch' or 'libtorch/') as components."""
    if not strip_prefix:
        return ()
    return tuple(part for part in strip_prefix.split("/") if part not in ("", "."))


def kind_of_mode(archive: str, name: str, mode: int) -> Kind | None:
    """The kind given by Unix mode bits; None when they say nothing (no file type)."""
    file_type = stat.S_IFMT(mode)
    if file_type == 0:
        return None
    if stat.S_ISLNK(mode):
        return Kind.SYMLINK
    if stat.S_ISDIR(mode):
        return Kind.DIR
    if stat.S_ISREG(mode):
        return Kind.FILE
    raise _refuse(archive, name, f"special file (mode {oct(mode)}: device, FIFO or socket)")


def file_mode(mode: int) -> int:
    """0o755 when any execute bit is set, else 0o644 (no setuid, no world-writable)."""
    return 0o755 if mode & 0o111 else 0o644


def _escape(start: tuple[str, ...], target: str, links: dict[tuple[str, ...], str]) -> str | None:
    """Why ``target`` (relative to directory ``start``) is unsafe, or None when it stays inside."""
    stack = list(start)
    todo = target.split("/")
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return "points outside the target"
            stack.pop()
            continue
        stack.append(part)
        linked = links.get(tuple(stack))
        if linked is None:
            continue
        hops += 1
        if hops > _MAX_HOPS:
            return "is part of a symlink loop"
        if linked.startswith("/"):
            return "points outside the target"
        stack.pop()
        todo = linked.split("/") + todo
    return None


def check_plan(archive: str, entries: Iterable[Entry], skipped: list[str]) -> Plan:
    """Refuse entries that collide, go through symlinks, or link outside the root."""
    plan = Plan(list(entries), skipped)
    links = {entry.parts: entry.link for entry in plan.entries if entry.kind is Kind.SYMLINK}
    leaves: dict[tuple[str, ...], Entry] = {}
    dirs: set[tuple[str, ...]] = set()
    for entry in plan.entries:
        for depth in range(1, len(entry.parts)):
            prefix = entry.parts[:depth]
            if prefix in links:
                raise _refuse(
                    archive, entry.name, f"it would be written through symlink {'/'.join(prefix)!r}"
                )
            dirs.add(prefix)
        if entry.kind is Kind.DIR:
            dirs.add(entry.parts)
            continue
        if entry.parts in leaves:
            raise _refuse(archive, entry.name, "the archive holds this path twice")
        leaves[entry.parts] = entry
    for parts, entry in leaves.items():
        if parts in dirs:
            raise _refuse(archive, entry.name, "the path is both a file and a directory")
        if entry.kind is Kind.SYMLINK:
            if entry.link.startswith("/") or "\x00" in entry.link or not entry.link:
                raise _refuse(
                    archive, entry.name, f"symlink to absolute or empty path {entry.link!r}"
                )
            problem = _escape(parts[:-1], entry.link, links)
            if problem is not None:
                raise _refuse(archive, entry.name, f"symlink to {entry.link!r} {problem}")
        if entry.kind is Kind.HARDLINK:
            other = leaves.get(tuple(entry.link.split("/")))
            if other is None or other.kind is not Kind.FILE:
                raise _refuse(
                    archive, entry.name, f"hard link to {entry.link!r}, not a file in the archive"
                )
    return plan


def plan_members(
    archive: str,
    members: Iterable[_Member],
    name: Callable[[_Member], str],
    prefix: tuple[str, ...],
    entry: Callable[[_Member, tuple[str, ...]], Entry],
) -> Plan:
    """The checked plan of an archive's ``members`` (zip or tar: ``name`` reads one's name):
    those outside ``prefix`` are skipped and listed, the root itself (``./`` or the prefix)
    is no entry, and ``entry`` makes each other one's entry from its parts below ``prefix``."""
    entries: list[Entry] = []
    skipped: list[str] = []
    for member in members:
        parts = member_parts(archive, name(member))
        if parts[: len(prefix)] != prefix:
            skipped.append(name(member))
            continue
        parts = parts[len(prefix) :]
        if parts:
            entries.append(entry(member, parts))
    return check_plan(archive, entries, skipped)
