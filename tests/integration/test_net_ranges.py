"""Parts of a remote file: ``read_range`` (a wheel's zip directory) and ``fetch_range`` (the
members' span, into the cache), over ``file://`` and over HTTP on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdl.errors import NetworkError
from fdl.net import RetryPolicy, fetch_range, read_range
from fdl.net._transport import FileTransport
from tests.support import faulty_http
from tests.support.faulty_http import BadRange, Drop, FaultyServer, Status, Truncate

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


def test_read_range_asks_for_the_bytes_it_reads(faulty_server: FaultyServer) -> None:
    url = faulty_server.add("/torch.whl", DATA)
    assert read_range(url, -100) == (DATA[-100:], len(DATA))
    assert read_range(url, 5000, 10) == (DATA[5000:5010], len(DATA))
    ranges = [entry.range for entry in faulty_server.log]
    assert ranges == ["bytes=0-0", f"bytes={len(DATA) - 100}-", "bytes=5000-5009"]
    assert faulty_server.sent() == 1 + 100 + 10  # not the rest of the file


def test_read_range_refuses_a_range_it_did_not_ask_for(faulty_server: FaultyServer) -> None:
    url = faulty_server.add("/torch.whl", DATA)
    faulty_server.script("/torch.whl", BadRange())
    with pytest.raises(NetworkError, match="sent the range 'bytes 0-"):
        read_range(url, 5000, 10)


def test_read_range_that_breaks_off_says_to_run_again(faulty_server: FaultyServer) -> None:
    url = faulty_server.add("/torch.whl", DATA)
    faulty_server.script("/torch.whl", Drop(after=1000))
    with pytest.raises(NetworkError) as caught:
        read_range(url, 0, 200_000)
    assert "torch.whl" in caught.value.message
    assert caught.value.hint == "run the same command again"


def test_read_range_that_ends_early_is_not_a_short_answer(faulty_server: FaultyServer) -> None:
    url = faulty_server.add("/torch.whl", DATA)
    faulty_server.script("/torch.whl", Truncate(send=100))
    with pytest.raises(NetworkError, match="broke off") as caught:
        read_range(url, 0, 1000)
    assert caught.value.hint == "run the same command again"


def test_fetch_range_resumes_where_the_stream_broke(
    faulty_server: FaultyServer, tmp_path: Path
) -> None:
    url = faulty_server.add("/torch.whl", DATA)
    faulty_server.script("/torch.whl", Drop(after=70_000), Status(503))
    dest = tmp_path / "ranges" / "1000-200000"
    got = fetch_range(url, dest, 1000, 200_000, retry=QUICK, sleep=lambda _s: None)
    assert dest.read_bytes() == DATA[1000:201_000]
    assert got == 200_000
    resumed = faulty_server.log[-1].range
    assert resumed is not None and resumed.endswith("-200999") and resumed != "bytes=1000-200999"
    assert list(dest.parent.iterdir()) == [dest]


def test_fetch_range_that_keeps_failing_leaves_nothing(
    faulty_server: FaultyServer, tmp_path: Path
) -> None:
    url = faulty_server.add("/torch.whl", DATA)
    faulty_server.always("/torch.whl", Drop(after=0))
    dest = tmp_path / "ranges" / "0-100000"
    with pytest.raises(NetworkError) as caught:
        fetch_range(url, dest, 0, 100_000, retry=QUICK, sleep=lambda _s: None)
    assert caught.value.hint == "run the same command again"
    assert "torch.whl" in caught.value.message
    assert list(dest.parent.iterdir()) == []  # no range file, no .part


def test_fetch_range_of_a_server_that_keeps_dropping_runs_out_of_attempts(
    faulty_server: FaultyServer, tmp_path: Path
) -> None:
    """Each attempt gets a few bytes, so none fails in a row: the attempts in all are bounded."""
    url = faulty_server.add("/torch.whl", DATA)
    faulty_server.always("/torch.whl", Drop(after=1000))
    policy = RetryPolicy(attempts=3, max_attempts=5, base_delay=0.0, jitter=0.0)
    dest = tmp_path / "ranges" / "0-200000"
    with pytest.raises(NetworkError, match="broke off") as caught:
        fetch_range(url, dest, 0, 200_000, retry=policy, sleep=lambda _s: None)
    assert caught.value.hint == "run the same command again"
    assert len(faulty_server.requests_to("/torch.whl")) <= 5
    assert list(dest.parent.iterdir()) == []
