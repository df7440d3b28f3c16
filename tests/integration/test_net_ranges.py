"""Parts of a remote file: ``read_range`` (a wheel's zip directory) and ``fetch_range`` (the
members' span, into the cache), over ``file://`` and over HTTP on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.net import RetryPolicy, fetch_range, read_range
from fdl.net._transport import FileTransport
from tests.support import faulty_http

faulty_server = faulty_http.faulty_server  # the fixture

DATA = os.urandom(300_000)
QUICK = RetryPolicy(attempts=3, base_delay=0.0, jitter=0.0)


@pytest.fixture
def local(tmp_path: Path) -> str:
    path = tmp_path / "torch.whl"
    path.write_bytes(DATA)
    return path.as_uri()


def test_a_file_answers_a_bounded_range(local: str) -> None:
    response = FileTransport().open(local, {"Range": "bytes=10-19"})
    try:
        assert response.status == 206
        assert response.header("Content-Range") == f"bytes 10-19/{len(DATA)}"
        assert b"".join(response.chunks(4)) == DATA[10:20]
    finally:
        response.close()
    past = FileTransport().open(local, {"Range": f"bytes=299990-{len(DATA) + 50}"})
    assert past.status == 206 and b"".join(past.chunks(1 << 16)) == DATA[299_990:]
    past.close()
    backwards = FileTransport().open(local, {"Range": "bytes=20-10"})
    assert backwards.status == 200  # not a range: the whole file, as a server answers
    backwards.close()


def test_read_and_fetch_ranges_of_a_local_file(local: str, tmp_path: Path) -> None:
    assert read_range(local, 1000, 24) == (DATA[1000:1024], len(DATA))
    assert read_range(local, -100) == (DATA[-100:], len(DATA))
    dest = tmp_path / "cache" / "1000-5000"
    assert fetch_range(local, dest, 1000, 5000) == 5000
    assert dest.read_bytes() == DATA[1000:6000]
