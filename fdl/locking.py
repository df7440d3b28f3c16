"""Inter-process locks on lock files, so two installs cannot corrupt a variant.

The lock is ``fcntl.flock`` on a small file beside what it protects (for
example ``libtorch/precompiled/cu128.lock``). The kernel releases it when the
holder exits, however it exits, so a crash never leaves a stale lock. The
holder writes who it is into the file, and a process that has to wait (or
gives up) names it in its message.

The lock file is never deleted: removing it while another process waits on it
would let a third process lock a new file and run alongside the first.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from fdl.errors import FdlError

__all__ = ["FileLock", "LockBusy", "WaitCallback", "describe_holder"]

WaitCallback = Callable[[str], None]


class LockBusy(FdlError):
    """Another process holds the lock and did not release it in time."""


def _holder_record(purpose: str) -> str:
    record = {
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        "purpose": purpose,
        "command": " ".join(sys.argv)[:300],
    }
    return json.dumps(record, sort_keys=True) + "\n"


def describe_holder(lock_path: Path) -> str:
    """Who holds (or last held) ``lock_path``, as a short phrase."""
    try:
        record = json.loads(lock_path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return "another process"
    if not isinstance(record, dict) or "pid" not in record:
        return "another process"
    text = f"process {record['pid']}"
    if record.get("host") and record.get("host") != os.uname().nodename:
        text += f" on {record['host']}"
    if record.get("purpose"):
        text += f" ({record['purpose']})"
    if record.get("since"):
        text += f", since {record['since']}"
    return text


class FileLock:
    """An exclusive inter-process lock held on ``path`` while in the ``with`` block.

    Args:
        path: The lock file (created if missing, never removed).
        timeout: Seconds to wait for another holder; None waits forever,
            0 tries once.
        purpose: What the holder does, shown to processes that wait.
        on_wait: Called once with a description of the holder when this
            process has to wait.
        poll: Seconds between attempts while waiting.

    Raises:
        LockBusy: On entry, when the lock is still held after ``timeout``.
    """

    def __init__(
        self,
        path: Path,
        *,
        timeout: float | None = None,
        purpose: str = "",
        on_wait: WaitCallback | None = None,
        poll: float = 0.05,
    ) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.purpose = purpose
        self.on_wait = on_wait
        self.poll = poll
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, waiting up to ``timeout`` seconds."""
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            self._wait_for(fd)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_record(self.purpose).encode(), 0)
        self._fd = fd

    def _wait_for(self, fd: int) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            holder = describe_holder(self.path)
            if deadline is not None and time.monotonic() >= deadline:
                raise LockBusy(
                    f"{self.path} is locked by {holder}",
                    hint="wait for it to finish and run again; if no such process is running, "
                    "the lock is free and a retry will succeed",
                )
            if not told and self.on_wait is not None:
                self.on_wait(f"waiting for {holder} to release {self.path}")
                told = True
            time.sleep(self.poll)

    def release(self) -> None:
        """Give the lock up (a no-op when not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
