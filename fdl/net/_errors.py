"""Download errors: all are :class:`~fdl.errors.NetworkError` (exit code 5)."""

from __future__ import annotations

from fdl.errors import NetworkError

__all__ = ["ChecksumMismatch", "NotFound", "RetriesExhausted", "SizeMismatch"]


class NotFound(NetworkError):
    """The server has no file at the URL (HTTP 404/410, or a missing file:// path)."""


class SizeMismatch(NetworkError):
    """The server sent (or announced) a size other than the expected one."""


class ChecksumMismatch(NetworkError):
    """The downloaded bytes do not have the expected sha256."""


class RetriesExhausted(NetworkError):
    """Every attempt failed with a transient error; ``cause`` is the last one."""

    def __init__(self, message: str, *, cause: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.cause = cause
