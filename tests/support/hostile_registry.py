"""A hostile OCI registry on 127.0.0.1: honest by default (push and pull work as with the
real one in tests/integration/test_libtorch_registry.py), and, per test, made to lie.

The registry keeps blobs and manifests in memory. A :data:`Fault` sees each request first
and may answer it itself: with any status, headers and body, a body that never ends, or
headers and body trickled a byte at a time. :func:`republish` writes an altered image (a
manifest, config or layers edited) under a new tag, so a test states only what it changes.
Every request is logged with its ``Authorization`` header (which host got credentials).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "OCI_MANIFEST",
    "Fault",
    "HostileRegistry",
    "Reply",
    "answer",
    "gzip_layer",
    "hostile_registry",
    "republish",
]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass
class Reply:
    """What a fault answers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    trickle: bool = False  # headers and body a byte at a time, 20 ms apart
    endless: bool = False  # ``body`` repeated until the client hangs up
    raw_head: bytes | None = None  # the status line and headers exactly, for malformed ones


Fault = Callable[["_Handler"], "Reply | None"]


@dataclass
class HostileRegistry:
    """The registry's store, its faults and what it saw."""

    address: str = ""
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, Authorization

    @property
    def repo(self) -> str:
        return f"{self.address}/team/libtorch"

    def manifest(self, tag: str) -> dict[str, Any]:
        return dict(json.loads(self.manifests[tag][0]))

    def config(self, tag: str) -> dict[str, Any]:
        return dict(json.loads(self.blobs[self.manifest(tag)["config"]["digest"]]))

    def put_blob(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return digest

    def put_manifest(self, tag: str, body: bytes, media_type: str = OCI_MANIFEST) -> str:
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        self.manifests[tag] = self.manifests[digest] = (body, media_type)
        return digest


def answer(where: str, reply: Reply, *, method: str = "GET", times: int | None = None) -> Fault:
    """A fault answering ``reply`` to requests whose path holds ``where`` (at most ``times``)."""
    left = [times]

    def fault(handler: _Handler) -> Reply | None:
        if handler.command != method or where not in handler.path or left[0] == 0:
            return None
        if left[0] is not None:
            left[0] -= 1
        return reply

    return fault


def gzip_layer(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> tuple[bytes, str]:
    """A gzip tar layer of ``members`` (name, kind, link in each TarInfo): (blob, diff_id)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member, data in members:
            member.size = len(data) if data is not None else 0
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
    tar = raw.getvalue()
    return gzip.compress(tar, mtime=0), "sha256:" + hashlib.sha256(tar).hexdigest()


def republish(
    registry: HostileRegistry,
    tag: str,
    new_tag: str,
    *,
    manifest: Callable[[dict[str, Any]], Any] | None = None,
    config: Callable[[dict[str, Any]], Any] | None = None,
    layers: list[tuple[bytes, str]] | None = None,
    config_body: bytes | None = None,
    manifest_body: bytes | None = None,
) -> str:
    """Store an altered copy of the image ``tag`` as ``new_tag``: ``layers`` (blob,
    diff_id) appended, then ``config`` and ``manifest`` applied to the parsed documents
    (returning None: edited in place), or bodies given whole. Returns the new digest."""
    body = registry.manifest(tag)
    conf = registry.config(tag)
    for blob, diff_id in layers or []:
        digest = registry.put_blob(blob)
        body["layers"].append({"mediaType": GZIP_LAYER, "digest": digest, "size": len(blob)})
        conf["rootfs"]["diff_ids"].append(diff_id)
    if config is not None:
        conf = config(conf) or conf
    data = config_body if config_body is not None else json.dumps(conf).encode()
    body["config"] = {**body["config"], "digest": registry.put_blob(data), "size": len(data)}
    if manifest is not None:
        body = manifest(body) or body
    raw = manifest_body if manifest_body is not None else json.dumps(body).encode()
    return registry.put_manifest(new_tag, raw)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: HostileRegistry

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up mid-answer is what these tests make happen


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, reply: Reply) -> None:
        try:
            if reply.raw_head is not None:
                self._write(reply.raw_head, reply.trickle)
            else:
                length = None if reply.endless else len(reply.body)
                head = [f"HTTP/1.1 {reply.status} X"]
                head += [f"{key}: {value}" for key, value in reply.headers.items()]
                if length is not None:
                    head.append(f"Content-Length: {length}")
                head.append("Connection: close" if reply.endless else "Connection: keep-alive")
                self._write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"), reply.trickle)
            if self.command == "HEAD":
                return
            if reply.endless:
                chunk = reply.body or b"x"
                while True:
                    self._write(chunk, reply.trickle)
            self._write(reply.body, reply.trickle)
        except OSError:  # the client hung up: what a hostile server expects
            self.close_connection = True

    def _write(self, data: bytes, trickle: bool) -> None:
        if not trickle:
            self.wfile.write(data)
            return
        for byte in data:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(0.02)

    def _handle(self) -> None:
        registry = self.server.registry
        registry.log.append((self.command, self.path, self.headers.get("Authorization", "")))
        length = int(self.headers.get("Content-Length") or 0)
        self.request_body = self.rfile.read(length) if length else b""
        for fault in list(registry.faults):
            reply = fault(self)
            if reply is not None:
                self._send(reply)
                return
        self._send(self._honest(registry))

    def _honest(self, registry: HostileRegistry) -> Reply:
        path, _, query = self.path.partition("?")
        if path == "/v2/":
            return Reply(200, b"{}")
        if "/blobs/uploads/" in path:
            if self.command == "POST":
                return Reply(202, headers={"Location": f"{path}{uuid.uuid4().hex}"})
            digest = dict(p.split("=", 1) for p in query.split("&") if "=" in p)["digest"]
            registry.blobs[digest] = self.request_body
            return Reply(201, headers={"Docker-Content-Digest": digest})
        if "/blobs/" in path:
            blob = registry.blobs.get(path.rsplit("/", 1)[-1])
            return (
                Reply(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
                if blob is None
                else Reply(200, blob)
            )
        if "/manifests/" in path:
            reference = path.rsplit("/", 1)[-1]
            if self.command == "PUT":
                kind = self.headers.get("Content-Type", OCI_MANIFEST)
                digest = registry.put_manifest(reference, self.request_body, kind)
                return Reply(201, headers={"Docker-Content-Digest": digest})
            found = registry.manifests.get(reference)
            if found is None:
                return Reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
            return Reply(200, found[0], {"Content-Type": found[1]})
        if path.endswith("/tags/list"):
            tags = sorted(name for name in registry.manifests if not name.startswith("sha256:"))
            return Reply(200, json.dumps({"name": "team/libtorch", "tags": tags}).encode())
        return Reply(404, b"{}")

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = _handle


@contextmanager
def hostile_registry() -> Iterator[HostileRegistry]:
    """A registry on 127.0.0.1 (an ephemeral port), for the length of the block."""
    registry = HostileRegistry()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.registry = registry
    registry.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
