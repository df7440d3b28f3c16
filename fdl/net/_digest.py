"""sha256 on a worker thread, so hashing overlaps network reads and disk writes.

hashlib releases the GIL on large buffers: with the digest computed beside
the receive loop, a download costs max(network, hashing) instead of their sum
(about 1 GB/s of sha256 on a current x86 core, the same order as loopback).
"""

from __future__ import annotations

import hashlib
import queue
import threading

__all__ = ["BackgroundSha256"]

# Chunks waiting to be hashed (up to ~1 MiB each): bounds the memory held.
_QUEUE_DEPTH = 16


class BackgroundSha256:
    """A sha256 fed in order from one thread and computed on another."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUE_DEPTH)
        self._thread: threading.Thread | None = None
        self._digest: str | None = None

    def update(self, chunk: bytes) -> None:
        """Add ``chunk`` (after everything added before)."""
        if self._digest is not None:
            raise RuntimeError("digest already finished")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fdl-sha256", daemon=True)
            self._thread.start()
        self._queue.put(chunk)

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self._hasher.update(chunk)

    def hexdigest(self) -> str:
        """The digest of everything added (no more updates after this)."""
        if self._digest is None:
            self.close()
            self._digest = self._hasher.hexdigest()
        return self._digest

    def close(self) -> None:
        """Stop the worker once it has hashed what it was given."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
