"""File helpers shared by the core: atomic writes and content digests."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text", "file_sha256"]

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
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def file_sha256(path: Path) -> str:
    """The sha256 of a file's content, as lowercase hex."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
