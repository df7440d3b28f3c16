"""Values fdl parsed once, kept between runs as ``marshal`` data beside the key they were
made for (the exact text read, or its digest, and fdl's version): what a command whose
answer needs a YAML file (a compatibility table, a compose file) reads instead of
importing and running the YAML parser.

An entry is used only when its key equals the key of what was read now; one that is
unreadable, too big, not a plain file or not of this format is a miss. Entries are written
atomically (0600, in a 0700 directory), only into a directory fdl made for them (it holds
the ``CACHEDIR.TAG`` fdl writes when it makes one: a directory of the user's of the same
name under ``FDL_CACHE_DIR`` gets nothing) and a real directory, not a link; any failure to write one only means parsing again next time. A
value marshal cannot hold is not kept. Pruning takes only entries (``*.marshal``).
"""

from __future__ import annotations

import marshal
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["keep", "kept"]


def kept(entry: Path, key: tuple[object, ...], *, limit: int) -> object | None:
    """The value kept in ``entry`` for ``key``; None when there is none."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        handle = os.open(entry, flags)
    except OSError:
        return None
    try:
        with open(handle, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return None
            data = stream.read(limit + 1)
        found = marshal.loads(data) if len(data) <= limit else None
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(found, tuple) or len(found) != 2 or found[0] != key:
        return None
    value: object = found[1]
    return value


def keep(
    entry: Path, key: tuple[object, ...], value: object, *, limit: int, max_entries: int = 0
) -> None:
    """Keep ``value`` for ``key`` in ``entry`` (atomically, 0600); with ``max_entries``, the
    directory keeps at most that many files (the least recently written go first)."""
    import stat

    from fdl.paths import is_own_cache, own_cache_dir

    try:
        data = marshal.dumps((key, value))  # type: ignore[arg-type]
    except ValueError:  # a value marshal cannot hold (a date YAML made)
        return
    if len(data) > limit:
        return
    temporary = entry.with_name(f".{entry.name}.{os.getpid()}")
    directory = entry.parent
    try:
        if not os.path.lexists(directory):
            own_cache_dir(directory.parent)  # the cache itself, tagged when fdl makes it
            own_cache_dir(directory)
            os.chmod(directory, 0o700)
        if not stat.S_ISDIR(os.lstat(directory).st_mode) or not is_own_cache(directory):
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with open(os.open(temporary, flags, 0o600), "wb") as stream:
            stream.write(data)
        os.replace(temporary, entry)
        if max_entries:
            _prune(directory, max_entries)
    except OSError:
        _unlink(temporary)


def _prune(directory: Path, most: int) -> None:
    """Keep the newest ``most`` entries (a temporary file a killed writer left counts too,
    and goes first when it is the oldest); files of other names are left."""
    import re

    ours = re.compile(r"\.?[^/]+\.marshal(?:\.[0-9]+)?")
    entries = []
    with os.scandir(directory) as listing:
        for item in listing:
            if ours.fullmatch(item.name) and item.is_file(follow_symlinks=False):
                entries.append((item.stat(follow_symlinks=False).st_mtime_ns, item.path))
    entries.sort()
    for _, name in entries[: max(0, len(entries) - most)]:
        _unlink(name)


def _unlink(name: str | Path) -> None:
    import contextlib

    with contextlib.suppress(OSError):
        os.unlink(name)
