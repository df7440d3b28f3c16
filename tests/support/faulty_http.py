"""A threaded HTTP server on 127.0.0.1 with Range support and scripted faults.

Serves in-memory or on-disk files with ETag / Last-Modified and single-range
requests (``bytes=N-`` and ``bytes=N-M``, ``If-Range``). Each request to a
path takes the next fault from that path's script (``None`` = serve normally);
when the script is used up, the path's standing fault (if any) applies.
Every request is logged with the body bytes the server really wrote.

Use it as a pytest fixture (``from tests.support.faulty_http import faulty_server``)
or as a context manager; ``python -m tests.support.faulty_http DIR`` serves a
directory from a separate process (the benchmark does that) and prints the port.
"""

from __future__ import annotations

import argparse
import email.utils
import hashlib
import io
import socket
import struct
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import pytest

__all__ = [
    "BadRange",
    "Drop",
    "Fault",
    "FaultyServer",
    "IgnoreRange",
    "Served",
    "Stall",
    "Status",
    "Trickle",
    "Truncate",
    "WrongContent",
    "faulty_server",
]


@dataclass(frozen=True)
class Drop:
    """Send ``after`` body bytes, then reset the connection (RST), like a broken link.

    Data still in the server's socket buffer when the reset goes out is lost, as
    on a real network; ``settle`` seconds of waiting first keeps that small.
    """

    after: int
    settle: float = 0.05


@dataclass(frozen=True)
class Truncate:
    """Announce the full Content-Length, send ``send`` body bytes, then close cleanly."""

    send: int


@dataclass(frozen=True)
class Status:
    """Answer ``code`` with a short body (5xx, 404, 403, 429...)."""

    code: int
    retry_after: str | None = None
    body: bytes = b"scripted error\n"
    location: str | None = None  # for redirects


@dataclass(frozen=True)
class WrongContent:
    """Serve the file with every byte flipped (same size and validators), or ``data`` with 200."""

    data: bytes | None = None


@dataclass(frozen=True)
class IgnoreRange:
    """Answer 200 with the whole file even when a range was asked for."""


@dataclass(frozen=True)
class BadRange:
    """Answer a range request with 206 and a Content-Range that starts elsewhere (at 0)."""


@dataclass(frozen=True)
class Trickle:
    """Send the body slowly: ``chunk`` bytes every ``delay`` seconds."""

    chunk: int = 1024
    delay: float = 0.005


@dataclass(frozen=True)
class Stall:
    """Send ``after`` body bytes, then nothing for ``seconds``, then close."""

    after: int
    seconds: float


Fault = Drop | Truncate | Status | WrongContent | IgnoreRange | BadRange | Trickle | Stall


@dataclass
class _Resource:
    data: bytes | None
    file: Path | None
    etag: str | None
    last_modified: str | None
    ranges: bool
    size: int
    content_type: str = "application/octet-stream"

    def open(self) -> BinaryIO:
        assert self.file is not None
        return self.file.open("rb")

    def content(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.file is not None
        return self.file.read_bytes()


@dataclass
class Served:
    """One request as the server saw and answered it."""

    method: str
    path: str
    headers: dict[str, str]
    status: int = 0
    sent: int = 0  # body bytes written to the socket
    fault: str | None = None
    aborted: bool = False  # the client went away while we were sending
    finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @property
    def range(self) -> str | None:
        return self.headers.get("range")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: FaultyServer


class FaultyServer:
    """The server. ``start()``/``stop()`` or ``with FaultyServer() as server:``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resources: dict[str, _Resource] = {}
        # each fault with the request size it applies to: only requests for more bytes
        self._scripts: dict[str, deque[tuple[Fault | None, int]]] = defaultdict(deque)
        self._standing: dict[str, tuple[Fault, int]] = {}
        self._log: list[Served] = []
        self.stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> FaultyServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # -- content ---------------------------------------------------------
    def add(
        self,
        path: str,
        data: bytes,
        *,
        etag: bool = True,
        last_modified: bool = True,
        ranges: bool = True,
        content_type: str = "application/octet-stream",
    ) -> str:
        """Serve ``data`` at ``path`` (replacing what was there; a new ETag); returns its URL."""
        tag = f'"{hashlib.sha256(data).hexdigest()[:16]}"' if etag else None
        modified = _http_date() if last_modified else None
        self._put(path, _Resource(data, None, tag, modified, ranges, len(data), content_type))
        return self.url(path)

    def add_file(self, path: str, file: Path, *, ranges: bool = True) -> str:
        """Serve the file on disk at ``path``; returns its URL."""
        stat = file.stat()
        tag = f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"'
        modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
        self._put(path, _Resource(None, file, tag, modified, ranges, stat.st_size))
        return self.url(path)

    def etag(self, path: str) -> str | None:
        """The ETag the server sends for ``path``."""
        with self._lock:
            return self._resources[path].etag

    def _put(self, path: str, resource: _Resource) -> None:
        with self._lock:
            self._resources[path] = resource

    # -- faults ----------------------------------------------------------
    def script(self, path: str, *faults: Fault | None, larger_than: int = -1) -> None:
        """Queue faults for the next requests to ``path`` (None = a normal answer).

        ``larger_than``: the faults wait for requests for more than that many body bytes
        (the range asked for, else the file); smaller ones are answered normally.
        """
        with self._lock:
            self._scripts[path].extend((fault, larger_than) for fault in faults)

    def always(self, path: str, fault: Fault | None, *, larger_than: int = -1) -> None:
        """A fault for every request to ``path`` (for more than ``larger_than`` body bytes)
        once its script is used up."""
        with self._lock:
            if fault is None:
                self._standing.pop(path, None)
            else:
                self._standing[path] = (fault, larger_than)

    def _take(self, path: str, headers: dict[str, str]) -> tuple[_Resource | None, Fault | None]:
        with self._lock:
            resource = self._resources.get(path)
            asked = _asked(resource, headers)
            queue = self._scripts.get(path)
            if queue and asked > queue[0][1]:
                return resource, queue.popleft()[0]
            standing = self._standing.get(path)
            fault = standing[0] if standing and asked > standing[1] else None
            return resource, fault

    # -- log -------------------------------------------------------------
    @property
    def log(self) -> list[Served]:
        """Requests in arrival order, once their handlers finish (up to 2 s of waiting).

        A client can read the last byte before the handler has counted it; waiting
        keeps the counts exact. A handler still stalling after 2 s is shown as is.
        """
        with self._lock:
            entries = list(self._log)
        deadline = time.monotonic() + 2.0
        for entry in entries:
            entry.finished.wait(max(deadline - time.monotonic(), 0.0))
        return entries

    def requests_to(self, path: str) -> list[Served]:
        return [entry for entry in self.log if entry.path == path]

    def sent(self, path: str | None = None) -> int:
        """Body bytes written for ``path`` (all paths when None)."""
        return sum(entry.sent for entry in self.log if path is None or entry.path == path)

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def _record(self, entry: Served) -> None:
        with self._lock:
            self._log.append(entry)


def _http_date() -> str:
    return email.utils.formatdate(time.time(), usegmt=True)


def _asked(resource: _Resource | None, headers: dict[str, str]) -> int:
    """How many body bytes a request asks for (a range's, else the whole file's)."""
    if resource is None:
        return 0
    wanted = _parse_range(headers.get("range"), resource.size) if resource.ranges else None
    return resource.size if wanted is None else max(wanted[1] - wanted[0] + 1, 0)


def _parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    """(start, end inclusive) of a single ``bytes=`` range, or None if absent/invalid."""
    if not value or not value.startswith("bytes=") or "," in value:
        return None
    first, dash, last = value[len("bytes=") :].partition("-")
    if not dash or not first.isdigit() or (last and not last.isdigit()):
        return None
    start = int(first)
    if last and int(last) < start:
        return None
    end = int(last) if last else size - 1
    return start, min(end, size - 1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _serve(self, *, body: bool) -> None:
        owner = self.server.owner
        path = urlsplit(self.path).path
        headers = {key.lower(): value for key, value in self.headers.items()}
        resource, fault = owner._take(path, headers)
        entry = Served(self.command, path, headers, fault=type(fault).__name__ if fault else None)
        owner._record(entry)
        try:
            self._respond(entry, resource, fault, body=body)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            entry.aborted = True
            self.close_connection = True
        finally:
            entry.finished.set()

    def handle(self) -> None:
        # A client that resets the connection between requests is not an error here.
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def _respond(
        self, entry: Served, resource: _Resource | None, fault: Fault | None, *, body: bool
    ) -> None:
        if isinstance(fault, Status):
            return self._status(entry, fault)
        if resource is None:
            return self._status(entry, Status(404, body=b"not found\n"))
        if isinstance(fault, WrongContent) and fault.data is not None:
            # A whole other body with status 200, e.g. an HTML page where a zip was expected.
            return self._status(entry, Status(200, body=fault.data))
        size = resource.size
        wanted = None
        if resource.ranges and not isinstance(fault, IgnoreRange):
            wanted = _parse_range(entry.headers.get("range"), size)
            condition = entry.headers.get("if-range")
            if (
                wanted is not None
                and condition is not None
                and condition not in (resource.etag, resource.last_modified)
            ):
                wanted = None
        if wanted is not None and wanted[0] >= size:
            self._head(entry, 416, {"Content-Range": f"bytes */{size}", "Content-Length": "0"})
            return None
        start, end = wanted if wanted is not None else (0, size - 1)
        if isinstance(fault, BadRange) and wanted is not None:
            start, end = 0, size - 1
        extra = {"Content-Length": str(end - start + 1), "Content-Type": resource.content_type}
        if resource.ranges:
            extra["Accept-Ranges"] = "bytes"
        if resource.etag:
            extra["ETag"] = resource.etag
        if resource.last_modified:
            extra["Last-Modified"] = resource.last_modified
        if wanted is not None:
            extra["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._head(entry, 206 if wanted is not None else 200, extra)
        if body:
            self._body(entry, resource, fault, start, end - start + 1)
        return None

    def _status(self, entry: Served, fault: Status) -> None:
        extra = {"Content-Length": str(len(fault.body)), "Content-Type": "text/plain"}
        if fault.retry_after is not None:
            extra["Retry-After"] = fault.retry_after
        if fault.location is not None:
            extra["Location"] = fault.location
        self._head(entry, fault.code, extra)
        if self.command != "HEAD":
            self._write(entry, fault.body)

    def _head(self, entry: Served, code: int, headers: dict[str, str]) -> None:
        entry.status = code
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def _write(self, entry: Served, data: bytes | memoryview) -> None:
        self.wfile.write(data)
        entry.sent += len(data)

    def _body(
        self, entry: Served, resource: _Resource, fault: Fault | None, start: int, length: int
    ) -> None:
        limit = length
        if isinstance(fault, Drop):
            limit = min(fault.after, length)
        elif isinstance(fault, Truncate):
            limit = min(fault.send, length)
        elif isinstance(fault, Stall):
            limit = min(fault.after, length)
        if isinstance(fault, WrongContent):
            content = bytes(b ^ 0x5A for b in resource.content())
            self._send_chunks(entry, _slices(content, start, limit, 1 << 16), None)
        elif resource.file is not None and not isinstance(fault, Trickle):
            self._sendfile(entry, resource, start, limit)
        else:
            chunk = fault.chunk if isinstance(fault, Trickle) else 1 << 18
            delay = fault.delay if isinstance(fault, Trickle) else None
            self._send_chunks(entry, _resource_slices(resource, start, limit, chunk), delay)
        self._after_body(fault)

    def _send_chunks(
        self, entry: Served, chunks: Iterator[bytes | memoryview], delay: float | None
    ) -> None:
        stopping = self.server.owner.stopping
        for piece in chunks:
            self._write(entry, piece)
            if delay is not None and stopping.wait(delay):
                return

    def _sendfile(self, entry: Served, resource: _Resource, start: int, length: int) -> None:
        # In slices, so the count of bytes sent stays exact when the client goes away.
        with resource.open() as handle:
            offset, end = start, start + length
            while offset < end:
                count = min(8 << 20, end - offset)
                sent = self.connection.sendfile(handle, offset, count)
                if sent == 0:
                    break
                offset += sent
                entry.sent += sent

    def _after_body(self, fault: Fault | None) -> None:
        if isinstance(fault, Drop):
            self.close_connection = True
            # Let what was written reach the client first, so "after N bytes" means
            # roughly N bytes arrived; then linger 0 makes close send a reset.
            self.server.owner.stopping.wait(fault.settle)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.wfile.close()
            self.rfile.close()
            self.connection.close()
            # The base class flushes and closes these after the handler returns.
            self.wfile = io.BytesIO()
            self.rfile = io.BytesIO()
        elif isinstance(fault, Truncate):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(fault, Stall):
            self.server.owner.stopping.wait(fault.seconds)
            self.close_connection = True


def _slices(content: bytes, start: int, length: int, chunk: int) -> Iterator[memoryview]:
    view = memoryview(content)
    end = min(start + length, len(content))
    for offset in range(start, end, chunk):
        yield view[offset : min(offset + chunk, end)]


def _resource_slices(
    resource: _Resource, start: int, length: int, chunk: int
) -> Iterator[bytes | memoryview]:
    if resource.data is not None:
        yield from _slices(resource.data, start, length, chunk)
        return
    with resource.open() as handle:
        handle.seek(start)
        remaining = length
        while remaining > 0 and (piece := handle.read(min(chunk, remaining))):
            remaining -= len(piece)
            yield piece


@pytest.fixture
def faulty_server() -> Iterator[FaultyServer]:
    """A started :class:`FaultyServer`, stopped after the test."""
    with FaultyServer() as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    """Serve the files of a directory until stdin closes; print ``PORT <n>`` first."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    with FaultyServer() as server:
        for file in sorted(args.directory.iterdir()):
            if file.is_file():
                server.add_file("/" + file.name, file)
        print(f"PORT {server.port}", flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
