"""One download request as the caller described it, and the errors it can end with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fdl._grammar import count
from fdl.errors import NetworkError
from fdl.net._errors import ChecksumMismatch, NotFound, RetriesExhausted, SizeMismatch
from fdl.net._results import ProgressCallback
from fdl.net._retry import RetryPolicy

__all__ = ["MIRROR_HINT", "Request", "content_range"]

MIRROR_HINT = (
    "the version or variant may not exist: check it; if this machine must use a mirror, "
    "set FDL_LIBTORCH_MIRROR (or libtorch.mirror in fdl.yml) to its base URL"
)


def content_range(value: str | None) -> tuple[int | None, int | None, int | None]:
    """(start, end, total) of ``bytes a-b/t`` or ``bytes */t``; Nones where absent."""
    if not value or not value.startswith("bytes "):
        return None, None, None
    span, _, total_text = value[len("bytes ") :].partition("/")
    total = count(total_text)
    first, dash, last = span.partition("-")
    start, end = count(first), count(last)
    if dash and start is not None and end is not None:
        return start, end, total
    return None, None, total


@dataclass(frozen=True)
class Request:
    """What to fetch and how (the caller's options, normalised)."""

    url: str
    source_url: str
    sha256: str | None
    size: int | None
    label: str
    not_found_hint: str | None
    user_agent: str
    retry: RetryPolicy
    sleep: Callable[[float], None]
    on_progress: ProgressCallback | None
    chunk_size: int

    @property
    def where(self) -> str:
        """The URL for messages, naming the upstream URL when a mirror serves it."""
        if self.url == self.source_url:
            return self.url
        return f"{self.url} (mirror of {self.source_url})"

    def announced_size_error(self, total: int) -> SizeMismatch:
        return SizeMismatch(
            f"{self.label}: the server announces {total} bytes at {self.where}, "
            f"expected {self.size}",
            hint="the file upstream is not the expected one; check the version and the "
            "expected size, or the mirror's copy",
        )

    def size_error(self, what: str) -> SizeMismatch:
        return SizeMismatch(
            f"{self.label}: size mismatch for {self.where}: got {what}",
            hint="the server sent a different file than it announced; run again, or use a mirror",
        )

    def checksum_error(self, digest: str) -> ChecksumMismatch:
        return ChecksumMismatch(
            f"{self.label}: sha256 mismatch for {self.where}: expected {self.sha256}, got {digest}",
            hint="the download was corrupted or the file changed upstream; the partial data "
            "was removed, run again; if it persists the expected checksum may be out of date",
        )

    def exhausted_error(self, attempts: int, cause: str, kept: int, part: Path) -> RetriesExhausted:
        resume = f"; {kept} bytes are kept in {part} and the next run resumes" if kept else ""
        return RetriesExhausted(
            f"download of {self.where} failed after {attempts} attempts: {cause}",
            cause=cause,
            hint=f"check the network connection or proxy (HTTPS_PROXY){resume}",
        )

    def restart_error(self, reason: str) -> NetworkError:
        return NetworkError(
            f"download of {self.where} kept starting over: {reason}",
            hint="the file on the server keeps changing; try again later or use a mirror",
        )

    def http_error(self, status: int) -> NetworkError:
        """The error for a status that no retry will change (404, 403, 401, ...)."""
        if status in (404, 410):
            if self.url != self.source_url:
                hint = (
                    "the mirror does not have this file: copy it there under the same path, "
                    "or unset the mirror"
                )
            else:
                hint = self.not_found_hint or MIRROR_HINT
            return NotFound(f"{self.label} not found: {self.where} (HTTP {status})", hint=hint)
        if status == 403:
            return NetworkError(
                f"access to {self.where} was refused (HTTP 403)",
                hint=f"fdl sent User-Agent {self.user_agent!r}; a proxy or CDN may block it: "
                "check HTTPS_PROXY, or use a mirror (FDL_LIBTORCH_MIRROR)",
            )
        if status in (401, 407):
            return NetworkError(
                f"{self.where} needs credentials (HTTP {status})",
                hint="use a mirror that needs none, or set the proxy credentials in HTTPS_PROXY",
            )
        return NetworkError(f"the server answered HTTP {status} for {self.where}")
