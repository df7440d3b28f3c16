"""fdl.net.RegistryClient against a small registry on loopback that asks for a Bearer
token (the flow of Docker Hub, GHCR and most hosted registries) or Basic credentials."""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from fdl.net import RegistryClient, RegistryError

GOOD = "Basic " + base64.b64encode(b"me:s3cret").decode()


class Registry(BaseHTTPRequestHandler):
    scheme: ClassVar[str] = "Bearer"
    blobs: ClassVar[dict[str, bytes]] = {}
    manifests: ClassVar[dict[str, bytes]] = {}
    scopes: ClassVar[list[str]] = []
    ranges: ClassVar[bool] = True

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _allowed(self) -> bool:
        auth = self.headers.get("Authorization", "")
        if auth in ("Bearer tok-123", GOOD) and auth.split()[0] == self.scheme:
            return True
        port = self.server.server_address[1]
        challenge = (
            f'Bearer realm="http://127.0.0.1:{port}/token",service="reg",'
            'scope="repository:acme/app:pull,push"'
            if self.scheme == "Bearer"
            else 'Basic realm="reg"'
        )
        self._reply(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": challenge})
        return False

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        if self.path.startswith("/token"):
            self.scopes.append(self.path)
            if self.headers.get("Authorization") == GOOD:
                self._reply(200, b'{"token":"tok-123"}')
            else:
                self._reply(401)
            return
        if not self._allowed():
            return
        name = self.path.rsplit("/", 1)[-1]
        if "/tags/list" in self.path:
            if "last=b" in self.path:
                self._reply(200, b'{"name":"acme/app","tags":["c"]}')
            else:
                link = '</v2/acme/app/tags/list?n=2&last=b>; rel="next"'
                self._reply(200, b'{"name":"acme/app","tags":["a","b"]}', {"Link": link})
            return
        wanted = self.headers.get("Range", "")
        if "/blobs/" in self.path and name in self.blobs and wanted and self.ranges:
            start = int(wanted.removeprefix("bytes=").split("-")[0])
            body = self.blobs[name]
            content_range = f"bytes {start}-{len(body) - 1}/{len(body)}"
            self._reply(206, body[start:], {"Content-Range": content_range})
            return
        if "/manifests/" in self.path and name in self.manifests:
            body = self.manifests[name]
            self._reply(200, body, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        elif "/blobs/" in self.path and name in self.blobs:
            self._reply(200, self.blobs[name])
        else:
            self._reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}')

    def do_HEAD(self) -> None:
        if self._allowed():
            self._reply(200 if self.path.rsplit("/", 1)[-1] in self.blobs else 404)

    def do_POST(self) -> None:
        if self._allowed():
            self._reply(202, headers={"Location": "/v2/acme/app/blobs/uploads/u1?_state=x"})

    def do_PUT(self) -> None:
        body = self._body()
        if not self._allowed():
            return
        if "/blobs/uploads/" in self.path:
            digest = self.path.split("digest=")[1]
            if "sha256:" + hashlib.sha256(body).hexdigest() != digest.replace("%3A", ":"):
                self._reply(400, b'{"errors":[{"code":"DIGEST_INVALID","message":"bad"}]}')
                return
            self.blobs[digest.replace("%3A", ":")] = body
            self._reply(201)
        elif self.headers.get("Content-Type") != "application/vnd.oci.image.manifest.v1+json":
            self._reply(400, b'{"errors":[{"code":"MANIFEST_INVALID","message":"type"}]}')
        else:
            tag = self.path.rsplit("/", 1)[-1]
            self.manifests[tag] = body
            digest = "sha256:" + hashlib.sha256(body).hexdigest()
            self._reply(201, headers={"Docker-Content-Digest": digest})


@pytest.fixture
def registry() -> Iterator[str]:
    Registry.blobs, Registry.manifests, Registry.scopes = {}, {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("scheme", ["Bearer", "Basic"])
def test_upload_and_read_back_with_a_token_or_basic_auth(
    registry: str, tmp_path: Path, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Registry, "scheme", scheme)
    client = RegistryClient(registry, "acme/app", credentials=("me", "s3cret"))
    blob = tmp_path / "blob"
    blob.write_bytes(b"layer bytes" * 1000)
    digest = "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    assert not client.has_blob(digest)
    client.upload_blob(blob, digest)
    assert client.has_blob(digest)
    assert client.blob(digest, tmp_path / "back").read_bytes() == blob.read_bytes()
    body = b'{"schemaVersion":2}'
    stored = client.put_manifest("v1", body, "application/vnd.oci.image.manifest.v1+json")
    assert stored == "sha256:" + hashlib.sha256(body).hexdigest()
    served = client.manifest("v1", ("application/vnd.oci.image.manifest.v1+json",))
    assert (served.body, served.digest) == (body, stored)
    if scheme == "Bearer":  # the token was asked for the challenge's scope, once
        assert len(Registry.scopes) == 1 and "repository%3Aacme%2Fapp" in Registry.scopes[0]


def test_refusals_say_what_and_how(registry: str) -> None:
    anonymous = RegistryClient(registry, "acme/app")
    with pytest.raises(RegistryError, match="refused fdl's credentials") as denied:
        anonymous.has_blob("sha256:" + "0" * 64)
    assert denied.value.status == 401 and "docker login" in (denied.value.hint or "")
    client = RegistryClient(registry, "acme/app", credentials=("me", "s3cret"))
    with pytest.raises(RegistryError) as invalid:
        client.put_manifest("v1", b"{}", "application/vnd.docker.distribution.manifest.v2+json")
    assert (invalid.value.status, invalid.value.code) == (400, "MANIFEST_INVALID")
    assert "compression: gzip" in (invalid.value.hint or "")
    with pytest.raises(RegistryError, match="MANIFEST_UNKNOWN"):
        client.manifest("nope", ("application/vnd.oci.image.manifest.v1+json",))


def test_tags_follow_the_link_pages(registry: str) -> None:
    client = RegistryClient(registry, "acme/app", credentials=("me", "s3cret"))
    assert client.tags() == ["a", "b", "c"]


@pytest.mark.parametrize("ranges", [True, False])
def test_a_blob_download_resumes_its_part_file(
    registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ranges: bool
) -> None:
    """A .part left by an interrupted run is resumed with Range (or started afresh when the
    registry ignores the range); the result is checked against the digest either way."""
    monkeypatch.setattr(Registry, "ranges", ranges)
    data = bytes(range(256)) * 4096
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    Registry.blobs[digest] = data
    client = RegistryClient(registry, "acme/app", credentials=("me", "s3cret"))
    dest = tmp_path / "blob"
    (tmp_path / "blob.part").write_bytes(data[:1000])
    fetched = client.fetch_blob(digest, dest, size=len(data))
    assert dest.read_bytes() == data and not (tmp_path / "blob.part").exists()
    assert (fetched.resumed, fetched.received) == (
        (1000, len(data) - 1000) if ranges else (0, len(data))
    )


def test_a_blob_larger_or_other_than_its_descriptor_is_refused(
    registry: str, tmp_path: Path
) -> None:
    data = b"x" * 5000
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    Registry.blobs[digest] = data
    client = RegistryClient(registry, "acme/app", credentials=("me", "s3cret"))
    with pytest.raises(RegistryError, match="larger than the 4000 bytes"):
        client.fetch_blob(digest, tmp_path / "a", size=4000)
    assert not (tmp_path / "a.part").exists()
    other = "sha256:" + "1" * 64
    Registry.blobs[other] = data
    with pytest.raises(RegistryError, match="has another sha256"):
        client.fetch_blob(other, tmp_path / "b", size=len(data))
    assert not (tmp_path / "b").exists() and not (tmp_path / "b.part").exists()
    with pytest.raises(RegistryError, match="larger than 100 bytes"):
        client.blob_bytes(digest, 100)
