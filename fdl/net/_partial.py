"""The partial download beside its destination: ``<dest>.part`` and ``<dest>.part.json``.

The JSON file keeps what the server said about the file when the transfer
started (URL, ETag, Last-Modified, total size), so a later process can resume
with ``If-Range`` and the server tells whether the file is still the same.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from fdl._files import atomic_write_text
from fdl.net._digest import BackgroundSha256

__all__ = ["PartFile", "Validator"]

_READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class Validator:
    """What identifies one version of the remote file."""

    url: str
    etag: str | None = None
    last_modified: str | None = None
    total: int | None = None

    @property
    def if_range(self) -> str | None:
        """The value for an If-Range header: a strong ETag, else Last-Modified."""
        if self.etag and not self.etag.startswith("W/"):
            return self.etag
        return self.last_modified

    def same_version(self, other: Validator) -> bool:
        """False when the two responses clearly describe different files."""
        if self.etag and other.etag and self.etag != other.etag:
            return False
        if self.last_modified and other.last_modified and self.last_modified != other.last_modified:
            return False
        return not (
            self.total is not None and other.total is not None and self.total != other.total
        )


class PartFile:
    """Bytes received so far for ``dest``, with their running sha256."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.path = dest.with_name(dest.name + ".part")
        self.meta_path = dest.with_name(dest.name + ".part.json")
        self.hasher = BackgroundSha256()
        self.size = 0

    def load(self, url: str, *, trust_without_validator: bool) -> Validator | None:
        """Take over a ``.part`` left by an earlier process, if it can be resumed.

        Returns the saved validator (and hashes the bytes already there), or
        None after discarding a part that cannot be trusted (other URL, no
        record, no way to tell whether the server's file changed).
        """
        validator = self._read_meta()
        usable = (
            validator is not None
            and validator.url == url
            and self.path.is_file()
            and (validator.if_range is not None or trust_without_validator)
            and (validator.total is None or self.path.stat().st_size <= validator.total)
        )
        if not usable:
            self.discard()
            return None
        self._hash_existing()
        return validator

    def _read_meta(self) -> Validator | None:
        try:
            raw: Any = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("url"), str):
            return None
        total = raw.get("total")
        return Validator(
            url=raw["url"],
            etag=raw.get("etag") if isinstance(raw.get("etag"), str) else None,
            last_modified=raw.get("last_modified")
            if isinstance(raw.get("last_modified"), str)
            else None,
            total=total if isinstance(total, int) and total >= 0 else None,
        )

    def _hash_existing(self) -> None:
        self._new_hasher()
        with self.path.open("rb") as handle:
            while chunk := handle.read(_READ_CHUNK):
                self.hasher.update(chunk)
                self.size += len(chunk)

    def save_meta(self, validator: Validator) -> None:
        """Record the validator atomically (a crash never leaves half a JSON file)."""
        atomic_write_text(self.meta_path, json.dumps(asdict(validator), sort_keys=True) + "\n")

    def reset(self) -> None:
        """Start over from zero bytes (keeps no data, keeps no record)."""
        self.discard()
        self.path.touch()

    def discard(self) -> None:
        """Remove the part and its record."""
        for path in (self.path, self.meta_path):
            path.unlink(missing_ok=True)
        self._new_hasher()

    def _new_hasher(self) -> None:
        self.hasher.close()
        self.hasher = BackgroundSha256()
        self.size = 0

    def close(self) -> None:
        """Stop the hashing thread (the part stays on disk)."""
        self.hasher.close()

    def open_append(self) -> BinaryIO:
        """The part opened for appending, truncated to the bytes already hashed."""
        handle = self.path.open("ab")
        handle.truncate(self.size)
        return handle

    def write(self, handle: BinaryIO, chunk: bytes) -> None:
        """Append ``chunk`` and fold it into the running hash."""
        handle.write(chunk)
        self.hasher.update(chunk)
        self.size += len(chunk)

    def commit(self) -> None:
        """Make the finished part appear at ``dest`` in one rename, durably."""
        with self.path.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(self.path, self.dest)
        self.meta_path.unlink(missing_ok=True)
        _fsync_dir(self.dest.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
