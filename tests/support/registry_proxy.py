"""A proxy on 127.0.0.1 in front of a real registry, with faults for blob downloads.

Reads (GET, HEAD) are forwarded to the upstream registry. A blob GET can be cut after some
bytes (the connection closes mid-body, as a dropped network does) or served with one byte
flipped (storage or a man in the middle altered it). Everything it forwarded is logged, with
the ``Range`` header asked for.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["RegistryProxy", "registry_proxy"]


@dataclass
class RegistryProxy:
    """What the proxy does to blob downloads, and what it saw."""

    upstream: str
    address: str = ""
    cut_after: int | None = None  # close the next blob body after this many bytes
    cut_digest: str = ""  # ... only that blob's
    flip: str | None = None  # flip the first byte of the blob with this digest ("": all)
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._forward(body=False)

    def do_GET(self) -> None:
        self._forward(body=True)

    def _forward(self, *, body: bool) -> None:
        proxy = self.server.proxy
        proxy.log.append((self.command, self.path, self.headers.get("Range", "")))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range")}
        request = urllib.request.Request(
            f"http://{proxy.upstream}{self.path}", method=self.command, headers=headers
        )
        try:
            answer = urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            answer = exc
        data = answer.read() if body else b""
        blob = "/blobs/" in self.path and answer.status in (200, 206)
        if blob and proxy.flip is not None and self.path.endswith(proxy.flip) and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        self.send_response(answer.status)
        for key, value in answer.headers.items():
            if key.lower() not in ("connection", "transfer-encoding", "date", "server"):
                self.send_header(key, value)
        self.end_headers()
        cutting = proxy.cut_after is not None and self.path.endswith(proxy.cut_digest)
        if blob and cutting and body and proxy.cut_after is not None:
            cut, proxy.cut_after = proxy.cut_after, None
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: RegistryProxy


@contextmanager
def registry_proxy(upstream: str) -> Iterator[RegistryProxy]:
    """A proxy on 127.0.0.1 (a free port) in front of ``upstream`` (``host:port``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.proxy = RegistryProxy(upstream, f"127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.proxy
    finally:
        server.shutdown()
        server.server_close()
