"""File helpers shared by the core: atomic writes and content digests."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "NotARegularFile",
    "atomic_write_text",
    "copy_tree",
    "existing_mode",
    "file_sha256",
    "first_line",
    "leaves",
    "link_tree",
    "load_toml",
    "output_refusal",
    "read_small_text",
    "tree_size",
]

_CHUNK = 1 << 20


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never half.

    The text goes to a temporary file in the same directory (fsynced), which then
    replaces ``path``; on any failure the temporary file is removed. Without
    ``mode`` the file gets what ``open()`` would give it (0666 minus the umask),
    not the 0600 of a temporary file.
    """
    if mode is None:
        mode = 0o666 & ~_umask()
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        if exc.filename is None:  # write() on a full disk names no file: name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def leaves(root: Path, path: Path) -> bool:
    """True when writing ``path`` would land outside ``root``: a directory on the way, or
    the path itself, is a symbolic link (or ``..``) whose resolved location is not under
    ``root`` (links inside ``root`` are followed). Where fdl writes a file of the
    project's it checks this first: it never writes outside the project through a link.
    """
    try:
        base = root.resolve()
        where = path.resolve() if path.is_symlink() else path.parent.resolve() / path.name
    except (OSError, RuntimeError):  # a link loop
        return True
    return not where.is_relative_to(base)


def existing_mode(path: Path, default: int | None = None) -> int | None:
    """The permission bits of the file at ``path``, ``default`` when there is none: what a
    file fdl rewrites keeps (the user's chmod +x survives an update)."""
    try:
        info = path.stat()
    except OSError:
        return default
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else default


def file_sha256(path: Path) -> str:
    """The sha256 of a file's content, as lowercase hex."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


class NotARegularFile(OSError):
    """A small state file fdl reads is not what fdl writes (a FIFO, a device, a directory,
    too large, or not UTF-8). ``reason`` says which."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_small_text(path: Path, limit: int = 1 << 20) -> str | None:
    """The UTF-8 text of a small state file fdl wrote (``.active``, ``variant.json``), or
    None when it does not exist.

    Never hangs or exhausts memory on what a user or a crash may leave there: a FIFO is
    opened non-blocking and refused, as is a device (``/dev/zero``), a directory, a file
    over ``limit`` bytes, or bytes that are not UTF-8.

    Raises:
        NotARegularFile: the path exists but is not such a file.
        OSError: it cannot be read (permissions).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise NotARegularFile(path, "is a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device or special file"
            raise NotARegularFile(path, f"is {kind}, not a file")
        if info.st_size > limit:
            raise NotARegularFile(path, f"is {info.st_size} bytes, more than {limit}")
        # Read what the file holds (not `limit` bytes: os.read allocates what it is asked
        # for), and on until the end in case it grew meanwhile, never past the limit.
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, max(info.st_size - size, 0) + 65536))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotARegularFile(path, f"is more than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotARegularFile(path, f"is not UTF-8 text (byte {exc.start})") from None


def read_text_file(path: Path, limit: int = 1 << 20) -> str:
    """:func:`read_small_text` for a file that must be there.

    Raises:
        FileNotFoundError: it is not.
        NotARegularFile, OSError: as :func:`read_small_text`.
    """
    text = read_small_text(path, limit)
    if text is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    return text


def reason_of(exc: BaseException) -> str:
    """Why reading a file failed, without its path (the message names it already): a
    :class:`NotARegularFile`'s reason, an OSError's strerror, else the error's text."""
    if isinstance(exc, NotARegularFile):
        return exc.reason
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class _CopyFailed(Exception):
    """Carries the first OSError out of shutil.copytree, which would otherwise collect
    every failure as text (and keep copying onto a full disk)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


def copy_tree(source: Path, destination: Path, *, links_inside: bool = False) -> None:
    """Copy a tree (symlinks as symlinks), stopping at the first failure.

    A FIFO, a socket or a device in the tree is refused before anything is copied:
    copying one would block (a FIFO) or never end (``/dev/zero``). With ``links_inside``
    (a tree fdl did not make, such as an installed torch), so is a link that leads out of
    ``source`` (to ``/etc/passwd``, to ``/``): the copy would carry it into a variant that
    may be pushed.

    Raises:
        UsageError: the tree holds such a file (named, with the fix).
        EnvironmentProblem: a link leads out of the tree (with ``links_inside``).
        OSError: the first file that could not be copied, with its errno (ENOSPC...).
    """
    import shutil

    special = _special_file(source)
    if special is not None:
        from fdl.errors import UsageError

        path, kind = special
        raise UsageError(
            f"{path} is {kind}, not a file, directory or link: fdl copies {source} only "
            "when it holds nothing else",
            hint=f"remove it from {source} (or copy the tree without it) and run again",
        )
    outside = _link_out(source) if links_inside else None
    if outside is not None:
        from fdl.errors import EnvironmentProblem

        link, target = outside
        raise EnvironmentProblem(
            f"{link} is a link to {target}, outside {source}: fdl does not copy it into a "
            "variant (nothing was installed)",
            hint=f"remove the link, or reinstall the package that holds {source}",
        )

    def copy(src: str, dst: str) -> object:
        try:
            return shutil.copy2(src, dst)
        except OSError as exc:
            raise _CopyFailed(exc) from None

    try:
        shutil.copytree(source, destination, symlinks=True, copy_function=copy)
    except _CopyFailed as failed:
        raise failed.error from None


def link_tree(source: Path, destination: Path, *, skip: frozenset[str]) -> None:
    """Copy ``source`` into a build context at ``destination`` (not yet existing): files
    hard-linked where the file system allows (else copied), links kept as links, and the
    names in ``skip`` left out at the top (``build``, ``.git``)."""
    import shutil

    def ignore(directory: str, names: list[str]) -> set[str]:
        return set(skip & set(names)) if Path(directory) == source else set()

    def link(src: str, dst: str) -> object:
        try:
            os.link(src, dst)
            return dst
        except OSError:
            return shutil.copy2(src, dst)

    shutil.copytree(source, destination, symlinks=True, ignore=ignore, copy_function=link)


def _special_file(root: Path) -> tuple[Path, str] | None:
    """The first FIFO, socket or device under ``root`` (links not followed), with its kind."""
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(directory) / name
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                return path, _kind(mode)
    return None


def _link_out(root: Path) -> tuple[Path, str] | None:
    """The first link under ``root`` whose target (resolved) is not under ``root``."""
    inside = os.path.realpath(root)
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(directory) / name
            if not path.is_symlink():
                continue
            target = os.path.realpath(path)
            if os.path.commonpath([inside, target]) != inside:
                return path, target
    return None


def first_line(path: Path, limit: int = 4096) -> str:
    """The first line of a text file (at most ``limit`` characters), "" when it cannot be
    read: where fdl looks for the header that marks a file as one it generated."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""  # a FIFO or a device: never fdl's, and reading it could block
        data = os.read(fd, limit * 4)
    except OSError:
        return ""
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    end = text.find("\n")
    return text[: min(limit, end + 1 if end >= 0 else len(text))]


# Where fdl never writes an output, whatever -o says: the kernel's and the devices'.
_SYSTEM_ROOTS = ("/proc", "/sys", "/dev")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a file" if stat.S_ISREG(mode) else "a special file"


def output_refusal(path: Path, *, directory: bool = False) -> str | None:
    """Why fdl must not write its output at ``path`` (a file, or with ``directory`` a
    directory it writes files into), or None when it may.

    Refused: a path in ``/proc``, ``/sys`` or ``/dev`` (``/dev/null`` included: the output
    would be lost, or writing would block or fail half-way), and an existing path of
    another kind (a FIFO, a device, a socket; a file where a directory is wanted, or the
    reverse). Whether an existing file is fdl's is the caller's question.
    """
    resolved = path.resolve()
    for root in _SYSTEM_ROOTS:
        if resolved == Path(root) or Path(root) in resolved.parents:
            return f"{path} is under {root}, not a place for fdl's files"
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be examined: {exc.strerror}"
    wanted = stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)
    if wanted:
        return None
    return f"{path} is {_kind(mode)}, not {'a directory' if directory else 'a regular file'}"


def tree_size(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed; what cannot be read counts 0):
    what deleting it frees, for the questions fdl asks before it deletes."""
    import os

    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            info = current.lstat()
        except OSError:
            continue
        total += info.st_blocks * 512 if hasattr(info, "st_blocks") else info.st_size
        if current.is_dir() and not current.is_symlink():
            try:
                stack.extend(current / name for name in os.listdir(current))
            except OSError:
                continue
    return total


def load_toml(text: str) -> dict[str, Any]:
    """``text`` parsed as TOML (Cargo.toml, Cargo.lock, rust-toolchain.toml): tomllib from
    Python 3.11, tomli before it.

    Raises:
        ValueError: not valid TOML (the parser's ``TOMLDecodeError``, a ValueError), or
            nested more deeply than the parser can follow.
    """
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("its arrays or tables are nested too deeply to read") from None
