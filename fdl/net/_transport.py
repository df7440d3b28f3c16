"""Getting bytes for a URL: HTTP(S) through requests, and ``file://`` from disk.

Both answer with the same small response shape (status, headers, chunks), so
the downloader handles a local mirror exactly like a server, Range included.
Connection problems become :class:`Transient`; problems that another attempt
cannot fix (a bad URL, a TLS verification failure) become :class:`Fatal`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from fdl import __version__

__all__ = [
    "PROJECT_URL",
    "Fatal",
    "FileTransport",
    "HttpTransport",
    "Response",
    "Transient",
    "Transport",
    "default_user_agent",
    "file_url_path",
    "open_transport",
    "rebase_url",
]

PROJECT_URL = "https://github.com/flodl-labs/fdl"


def default_user_agent() -> str:
    """A User-Agent that names fdl (the CDN of download.pytorch.org rejects urllib's)."""
    return f"fdl/{__version__} (+{PROJECT_URL})"


class Transient(Exception):
    """A failure another attempt may not meet (connection reset, timeout)."""


class Fatal(Exception):
    """A failure another attempt will meet again; ``hint`` says how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class Response(Protocol):
    """A response being received."""

    status: int
    url: str

    def header(self, name: str) -> str | None:
        """A header value (case-insensitive), or None."""
        ...

    def chunks(self, size: int) -> Iterator[bytes]:
        """The body as it arrives; raises :class:`Transient` if the stream breaks."""
        ...

    def close(self) -> None:
        """Release the connection or file."""
        ...


class Transport(Protocol):
    """Opens URLs of one family of schemes."""

    def open(self, url: str, headers: Mapping[str, str]) -> Response:
        """Send a GET with ``headers``; raises Transient or Fatal."""
        ...

    def close(self) -> None:
        """Release pooled connections."""
        ...


def rebase_url(url: str, mirror: str, *, upstream: str | None = None) -> str:
    """``url`` fetched from ``mirror`` instead of its origin.

    Without ``upstream`` the mirror holds the same paths as the origin host:
    ``https://download.pytorch.org/libtorch/cu128/x.zip`` with mirror
    ``file:///srv/pytorch`` becomes ``file:///srv/pytorch/libtorch/cu128/x.zip``.
    With ``upstream`` (a URL prefix of ``url``), only what follows that prefix
    is appended to the mirror.
    """
    if upstream is not None and url.startswith(upstream):
        return mirror.rstrip("/") + "/" + url[len(upstream) :].lstrip("/")
    source = urlsplit(url)
    base = urlsplit(mirror)
    path = base.path.rstrip("/") + "/" + source.path.lstrip("/")
    return urlunsplit((base.scheme, base.netloc, path, source.query, ""))


def file_url_path(url: str) -> Path:
    """The local path of a ``file://`` URL (host must be empty or localhost)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise Fatal(
            f"cannot read {url}: file:// URLs must name a local path",
            hint="use file:///absolute/path (three slashes)",
        )
    from urllib.request import url2pathname

    return Path(url2pathname(unquote(parts.path)))


def open_transport(url: str, *, user_agent: str, timeout: tuple[float, float]) -> Transport:
    """The transport for ``url``'s scheme."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        return FileTransport()
    if scheme in ("http", "https"):
        return HttpTransport(user_agent=user_agent, timeout=timeout)
    raise Fatal(
        f"cannot download {url}: unsupported URL scheme {scheme or '(none)'!r}",
        hint="use an https://, http:// or file:// URL",
    )


def _describe(exc: BaseException) -> str:
    """A one-line cause without urllib3's nested reprs where possible."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


class _HttpResponse:
    def __init__(self, response: Any) -> None:
        self._response = response
        self.status: int = response.status_code
        self.url: str = response.url

    def header(self, name: str) -> str | None:
        value = self._response.headers.get(name)
        return None if value is None else str(value)

    def chunks(self, size: int) -> Iterator[bytes]:
        import requests
        import urllib3

        raw = self._response.raw
        # read1 hands over what has arrived (progress stays live on slow links)
        # and, like read, raises when fewer bytes than Content-Length arrive.
        reader = getattr(raw, "read1", None)
        try:
            if reader is None:
                yield from self._response.iter_content(size)
                return
            while chunk := reader(size):
                yield chunk
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            # urllib3's own errors (ProtocolError, ReadTimeoutError) come through read1.
            raise Transient(_describe(exc)) from exc

    def close(self) -> None:
        self._response.close()


class HttpTransport:
    """HTTP(S) through a requests session (pooled connections, proxies from the environment)."""

    def __init__(self, *, user_agent: str, timeout: tuple[float, float]) -> None:
        import requests

        self._session = requests.Session()
        self._session.headers["User-Agent"] = user_agent
        self._timeout = timeout

    def open(self, url: str, headers: Mapping[str, str]) -> Response:
        import requests

        try:
            response = self._session.get(
                url, headers=dict(headers), stream=True, timeout=self._timeout
            )
        except requests.exceptions.SSLError as exc:
            raise Fatal(
                f"TLS verification failed for {url}: {_describe(exc)}",
                hint="behind a proxy that re-signs TLS, point REQUESTS_CA_BUNDLE at its CA file",
            ) from exc
        except (
            requests.exceptions.InvalidURL,
            requests.exceptions.MissingSchema,
            requests.exceptions.InvalidSchema,
        ) as exc:
            raise Fatal(f"invalid URL {url}: {_describe(exc)}") from exc
        except requests.RequestException as exc:
            raise Transient(_describe(exc)) from exc
        # We ask for identity encoding; a server that compresses anyway still
        # yields the file's own bytes (the downloader then does not resume it).
        response.raw.decode_content = True
        return _HttpResponse(response)

    def close(self) -> None:
        self._session.close()


class _FileResponse:
    def __init__(
        self,
        status: int,
        url: str,
        headers: dict[str, str],
        handle: BinaryIO | None = None,
        length: int = 0,
    ) -> None:
        self.status = status
        self.url = url
        self._headers = {key.lower(): value for key, value in headers.items()}
        self._handle = handle
        self._length = length

    def header(self, name: str) -> str | None:
        return self._headers.get(name.lower())

    def chunks(self, size: int) -> Iterator[bytes]:
        if self._handle is None:
            return
        remaining = self._length
        try:
            while remaining > 0 and (chunk := self._handle.read(min(size, remaining))):
                remaining -= len(chunk)
                yield chunk
        except OSError as exc:
            raise Transient(_describe(exc)) from exc

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class FileTransport:
    """``file://`` URLs, answering like an HTTP server (200/206/404/416)."""

    def open(self, url: str, headers: Mapping[str, str]) -> Response:
        path = file_url_path(url)
        try:
            handle = path.open("rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return _FileResponse(404, url, {})
        except PermissionError:
            return _FileResponse(403, url, {})
        except OSError as exc:
            raise Transient(_describe(exc)) from exc
        import email.utils

        stat = os.fstat(handle.fileno())
        size = stat.st_size
        validators = {
            "ETag": f'"{size:x}-{stat.st_mtime_ns:x}"',
            "Last-Modified": email.utils.formatdate(stat.st_mtime, usegmt=True),
        }
        asked = _range_start(headers, validators)
        if asked is None:
            return _FileResponse(
                200, url, {**validators, "Content-Length": str(size)}, handle, size
            )
        start, end = asked
        if start >= size:
            handle.close()
            return _FileResponse(416, url, {"Content-Range": f"bytes */{size}"})
        last = size - 1 if end is None else min(end, size - 1)
        handle.seek(start)
        extra = {"Content-Range": f"bytes {start}-{last}/{size}"}
        extra["Content-Length"] = str(last - start + 1)
        return _FileResponse(206, url, {**validators, **extra}, handle, last - start + 1)

    def close(self) -> None:
        return None


def _range_start(
    headers: Mapping[str, str], validators: Mapping[str, str]
) -> tuple[int, int | None] | None:
    """Start and end (inclusive; None: to the end) of an honoured ``Range: bytes=N-`` or
    ``bytes=N-M`` request, else None (send it all)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    value = lowered.get("range", "")
    if not value.startswith("bytes="):
        return None
    start_text, dash, end_text = value[len("bytes=") :].partition("-")
    if not dash or not start_text.isdigit() or not (end_text == "" or end_text.isdigit()):
        return None
    if end_text and int(end_text) < int(start_text):
        return None
    condition = lowered.get("if-range")
    if condition is not None and condition not in validators.values():
        return None
    return int(start_text), int(end_text) if end_text else None
