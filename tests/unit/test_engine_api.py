"""Image sizes from the Engine API over a Unix socket (through the docker SDK), against a
small server of the test's own that answers the SDK's version handshake (the real daemon is
asked in tests/integration/test_engine_docker.py and test_engine_sdk.py)."""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest

from fdl.engine._api import image_sizes
from fdl.errors import EnvironmentProblem

REPORT = {
    "Images": [
        {"Id": "sha256:aaa", "Size": 842_000_123, "SharedSize": 841_200_000},
        {"Id": "sha256:bbb", "Size": 10, "SharedSize": -1},
    ]
}


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    status = 200
    body = json.dumps(REPORT).encode()
    paths: ClassVar[list[str]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path.endswith("/version"):  # the SDK's handshake (version="auto")
            status, body = 200, json.dumps({"ApiVersion": "1.41"}).encode()
        else:
            self.server.paths.append(self.path)
            status, body = self.server.status, self.server.body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass

    def address_string(self) -> str:  # a Unix socket has no client address
        return "unix"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[_Server]:
    server = _Server(str(tmp_path / "docker.sock"), _Handler)
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_sizes_are_exact_bytes_from_the_daemon(daemon: _Server, tmp_path: Path) -> None:
    host = f"unix://{tmp_path / 'docker.sock'}"
    assert image_sizes("sha256:aaa", host, {}) == (842_000_123, 841_200_000)
    assert image_sizes("sha256:bbb", None, {"DOCKER_HOST": host}) == (10, 0)  # -1: not computed
    assert daemon.paths == ["/v1.41/system/df", "/v1.41/system/df"]


def test_an_image_the_report_lacks_is_an_environment_problem(
    daemon: _Server, tmp_path: Path
) -> None:
    with pytest.raises(EnvironmentProblem, match="does not list image sha256:zzz"):
        image_sizes("sha256:zzz", f"unix://{tmp_path / 'docker.sock'}", {})


def test_a_refusing_daemon_is_an_environment_problem(daemon: _Server, tmp_path: Path) -> None:
    daemon.status, daemon.body = 500, b'{"message": "boom"}'
    with pytest.raises(EnvironmentProblem, match="refused a request: 500 Server Error") as caught:
        image_sizes("sha256:aaa", f"unix://{tmp_path / 'docker.sock'}", {})
    assert "boom" in str(caught.value)


def test_no_daemon_or_an_unsupported_address_is_an_environment_problem(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match=r"absent\.sock does not answer"):
        image_sizes("sha256:aaa", f"unix://{tmp_path / 'absent.sock'}", {})
    with pytest.raises(EnvironmentProblem, match="cannot ask the docker daemon at ssh://me@host"):
        image_sizes("sha256:aaa", "ssh://me@host", {})
