"""What a download reports: progress while it runs, statistics when it is done."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DownloadResult", "Progress", "ProgressCallback", "RateMeter"]


@dataclass(frozen=True)
class Progress:
    """Where a download stands.

    Attributes:
        done: Bytes of the file on disk (a resumed part included); it only goes
            down when the server makes the download start over.
        total: The file's size, when the server announced it.
        rate: Bytes per second received over the last few seconds.
    """

    done: int
    total: int | None
    rate: float


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class DownloadResult:
    """What a finished download did.

    Attributes:
        path: The complete, verified file.
        url: The URL the bytes came from (the mirror's when one was used).
        size: Bytes in the file.
        sha256: Hex digest of the file.
        bytes_transferred: Body bytes received over the wire in this call.
        resumed_from: Bytes reused from a ``.part`` left by an earlier call.
        attempts: Requests made (1 when nothing failed; 0 when ``dest`` was already good).
        restarts: Times the transfer started over from zero.
        elapsed: Seconds spent, waiting for the lock excluded.
    """

    path: Path
    url: str
    size: int
    sha256: str
    bytes_transferred: int
    resumed_from: int
    attempts: int
    restarts: int
    elapsed: float


class RateMeter:
    """Bytes per second over the last few seconds."""

    def __init__(self, window: float = 3.0) -> None:
        self._window = window
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, total: int) -> float:
        """Record ``total`` bytes received at time ``now``; returns the current rate."""
        self._samples.append((now, total))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window:
            self._samples.popleft()
        first_time, first_total = self._samples[0]
        span = now - first_time
        return (total - first_total) / span if span > 0 else 0.0
