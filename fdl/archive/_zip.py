"""Zip archives: integrity test, safe extraction, reading one member."""

from __future__ import annotations

import os
import shutil
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from fdl.archive._plan import (
    ArchiveError,
    Entry,
    Kind,
    Plan,
    check_sizes,
    file_mode,
    kind_of_mode,
    plan_members,
    prefix_parts,
)
from fdl.archive._staging import ExtractResult, check_space, make_staging, publish
from fdl.errors import EnvironmentProblem

__all__ = ["read_member", "safe_extract_zip", "test_zip"]

_CHUNK = 1 << 20
_UNIX = 3  # ZipInfo.create_system of archives made on Unix: external_attr holds st_mode
# What zipfile raises for damaged content (RuntimeError: an encrypted member read without
# a password, which a libtorch archive never has).
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError, RuntimeError)
_ENCRYPTED = 0x1  # general purpose flag bit 0
ExtractProgress = Callable[[int, int], None]


def _open(path: Path) -> zipfile.ZipFile:
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ArchiveError(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ArchiveError(
            f"{path}: a member name is marked UTF-8 but is not ({exc.reason} at byte {exc.start})",
            hint="the archive is damaged or malicious; nothing was extracted. Download it again "
            "from a trusted source",
        ) from None
    except (*_CORRUPT, OSError) as exc:
        raise ArchiveError(
            f"{path} is not a readable zip archive ({exc})", hint=_not_zip_hint(path)
        ) from None
    try:
        _check_members(archive, path)
    except BaseException:
        archive.close()
        raise
    return archive


def _check_members(archive: zipfile.ZipFile, path: Path) -> None:
    """Refuse encrypted members and bombs by the central directory alone (nothing read)."""
    members = archive.infolist()
    for info in members:
        if info.flag_bits & _ENCRYPTED:
            raise ArchiveError(
                f"{path}: member {info.filename!r} is encrypted",
                hint="a libtorch archive has no encrypted members: it is not an official "
                "archive. Download it again from a trusted source",
            )
    declared = sum(info.file_size for info in members)
    check_sizes(str(path), declared, path.stat().st_size)


def _not_zip_hint(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            head = handle.read(512).lstrip().lower()
    except OSError:
        head = b""
    if head.startswith((b"<!doctype", b"<html", b"<?xml", b"<")):
        return (
            "it looks like a web page (an error page saved instead of the archive): check the URL"
        )
    return "the download is probably incomplete or damaged: delete it and download it again"


def test_zip(path: Path | str) -> int:
    """Read every member and check its CRC; returns the number of members.

    Raises:
        ArchiveError: Not a zip, or a member is corrupt (the first one is named).
    """
    path = Path(path)
    with _open(path) as archive:
        members = archive.infolist()
        for info in members:
            if info.is_dir():
                continue
            try:
                with archive.open(info) as stream:
                    while stream.read(_CHUNK):
                        pass
            except _CORRUPT as exc:
                raise ArchiveError(
                    f"{path}: member {info.filename!r} is corrupt ({exc})",
                    hint="delete the archive and download it again",
                ) from None
    return len(members)


# Not a test: keeps pytest from collecting it when a test module imports it.
test_zip.__test__ = False  # type: ignore[attr-defined]


def read_member(zip_path: Path | str, name: str, *, max_bytes: int = 64 << 20) -> bytes:
    """The content of one member (``libtorch/build-version``, say).

    Raises:
        ArchiveError: No such member, larger than ``max_bytes``, or corrupt.
    """
    zip_path = Path(zip_path)
    with _open(zip_path) as archive:
        try:
            info = archive.getinfo(name)
        except KeyError:
            raise ArchiveError(f"{zip_path} has no member {name!r}") from None
        if info.file_size > max_bytes:
            raise ArchiveError(f"{zip_path}: member {name!r} is larger than {max_bytes} bytes")
        try:
            return archive.read(info)
        except _CORRUPT as exc:
            raise ArchiveError(f"{zip_path}: member {name!r} is corrupt ({exc})") from None


def _entry(
    archive: zipfile.ZipFile, label: str, info: zipfile.ZipInfo, parts: tuple[str, ...]
) -> Entry:
    mode = info.external_attr >> 16 if info.create_system == _UNIX else 0
    kind = kind_of_mode(label, info.filename, mode)
    if info.filename.endswith("/"):
        kind = Kind.DIR
    if kind is None:
        kind = Kind.FILE
    link = ""
    if kind is Kind.SYMLINK:
        if info.file_size > 4096:
            raise ArchiveError(
                f"{label}: symlink {info.filename!r} has a {info.file_size}-byte target"
            )
        link = archive.read(info).decode("utf-8", "surrogateescape")
    return Entry(info.filename, parts, kind, file_mode(mode), info.file_size, link)


def _plan(archive: zipfile.ZipFile, label: str, strip_prefix: str | None) -> Plan:
    prefix = prefix_parts(strip_prefix)
    plan = plan_members(
        label,
        archive.infolist(),
        lambda info: info.filename,
        prefix,
        lambda info, parts: _entry(archive, label, info, parts),
    )
    if prefix and not plan.entries:
        raise ArchiveError(
            f"{label} has nothing under {'/'.join(prefix)}/",
            hint="the archive layout is not the expected one",
        )
    return plan


def _write_file(
    archive: zipfile.ZipFile, entry: Entry, dest: Path, progress: Callable[[int], None]
) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(dest, flags, 0o600)
    written = 0
    with os.fdopen(fd, "wb") as out, archive.open(entry.name) as stream:
        while chunk := stream.read(_CHUNK):
            out.write(chunk)
            written += len(chunk)
            progress(len(chunk))
        os.fchmod(out.fileno(), entry.mode)
    return written


def safe_extract_zip(
    path: Path | str,
    target: Path | str,
    *,
    strip_prefix: str | None = None,
    replace: bool = False,
    on_progress: ExtractProgress | None = None,
) -> ExtractResult:
    """Extract ``path`` so that ``target`` appears complete, or not at all.

    Every member is checked before anything is written (see ``fdl.archive``);
    the content goes to a staging directory beside ``target`` that is then
    renamed to ``target``. Execute bits are kept, symlinks inside the target too.

    Args:
        path: The zip archive.
        target: The directory to create.
        strip_prefix: Leading directory to remove from member names
            (``"libtorch"``); members outside it are skipped and listed.
        replace: Swap out an existing ``target`` instead of refusing.
        on_progress: Called with (bytes written, total bytes).

    Raises:
        ArchiveError: Unsafe or corrupt member, or ``target`` exists without ``replace``.
        EnvironmentProblem: Not enough disk space.
    """
    path, target = Path(path), Path(target)
    label = str(path)
    with _open(path) as archive:
        plan = _plan(archive, label, strip_prefix)
        total = plan.total_bytes
        check_space(target.parent, total, label)
        done = [0]

        def advance(count: int) -> None:
            done[0] += count
            if on_progress is not None:
                on_progress(done[0], total)

        staging = make_staging(target)
        try:
            result = _extract(archive, plan, staging, advance)
            publish(staging, target, replace=replace)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return ExtractResult(target, *result, skipped=tuple(plan.skipped))


def _extract(
    archive: zipfile.ZipFile, plan: Plan, staging: Path, advance: Callable[[int], None]
) -> tuple[int, int, int, int]:
    """Write the plan under ``staging``: (files, dirs, symlinks, bytes)."""
    dirs: set[tuple[str, ...]] = set()
    files = written = 0
    for entry in plan.entries:
        parent_depth = len(entry.parts) if entry.kind is Kind.DIR else len(entry.parts) - 1
        for depth in range(1, parent_depth + 1):
            dirs.add(entry.parts[:depth])
        staging.joinpath(*entry.parts[:parent_depth]).mkdir(parents=True, exist_ok=True)
        if entry.kind is Kind.FILE:
            try:
                written += _write_file(archive, entry, staging.joinpath(*entry.parts), advance)
            except _CORRUPT as exc:
                raise ArchiveError(
                    f"{archive.filename}: member {entry.name!r} is corrupt ({exc})",
                    hint="delete the archive and download it again",
                ) from None
            except OSError as exc:
                raise EnvironmentProblem(
                    f"cannot write {entry.name!r} under {staging.parent}: {exc.strerror or exc}",
                    hint="free some disk space or fix the permissions, then run again",
                ) from None
            files += 1
    # Links last: nothing is ever written after a symlink exists.
    links = [entry for entry in plan.entries if entry.kind is Kind.SYMLINK]
    for entry in links:
        os.symlink(entry.link, staging.joinpath(*entry.parts))
    return files, len(dirs), len(links), written
