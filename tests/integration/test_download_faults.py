"""The downloader against a real HTTP server on 127.0.0.1 with injected faults."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fdl.errors import NetworkError
from fdl.net import (
    ChecksumMismatch,
    NotFound,
    Progress,
    RetriesExhausted,
    RetryPolicy,
    SizeMismatch,
    download,
)
from tests.support import faulty_http
from tests.support.faulty_http import (
    BadRange,
    Drop,
    FaultyServer,
    IgnoreRange,
    Stall,
    Status,
    Trickle,
    Truncate,
    WrongContent,
)

faulty_server = faulty_http.faulty_server  # the fixture

SIZE = 2_000_000
DATA = os.urandom(SIZE)
SHA = hashlib.sha256(DATA).hexdigest()
QUICK = RetryPolicy(attempts=4, base_delay=0.0, jitter=0.0)


class Sleeps(list[float]):
    """Records the delays the downloader asks for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def leftovers(directory: Path) -> list[str]:
    """What a download left beside its destination, lock file aside."""
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".lock"))


@pytest.fixture
def served(faulty_server: FaultyServer) -> tuple[FaultyServer, str]:
    return faulty_server, faulty_server.add("/lt.zip", DATA)


def test_plain_download(served, tmp_path):
    server, url = served
    result = download(url, tmp_path / "lt.zip", sha256=SHA)
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    assert (result.size, result.sha256, result.attempts, result.resumed_from) == (SIZE, SHA, 1, 0)
    assert result.bytes_transferred == SIZE == server.sent("/lt.zip")
    assert leftovers(tmp_path) == ["lt.zip"]
    assert server.log[0].headers["user-agent"].startswith("fdl/")


def test_drop_mid_body_resumes_and_fetches_only_the_rest(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Drop(after=SIZE // 2))
    sleeps = Sleeps()
    result = download(url, tmp_path / "lt.zip", sha256=SHA, sleep=sleeps)
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    _, second = server.requests_to("/lt.zip")
    kept = int(second.range.removeprefix("bytes=").rstrip("-"))
    assert 0 < kept <= SIZE // 2
    assert second.headers["if-range"] == server.etag("/lt.zip")
    assert second.status == 206
    assert second.sent == SIZE - kept  # only the remainder crossed the wire again
    assert result.bytes_transferred == SIZE
    assert result.attempts == 2 and len(sleeps) == 1


def test_5xx_then_success(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Status(503), Status(502), Status(500))
    sleeps = Sleeps()
    result = download(
        url, tmp_path / "lt.zip", sha256=SHA, sleep=sleeps, retry=RetryPolicy(jitter=0)
    )
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    assert result.attempts == 4
    assert sleeps == [1.0, 2.0, 4.0]  # exponential backoff


def test_429_retry_after_is_honoured(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Status(429, retry_after="3"))
    sleeps = Sleeps()
    download(url, tmp_path / "lt.zip", sleep=sleeps)
    assert sleeps == [3.0]


def test_truncated_body_is_resumed_to_the_right_bytes(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Truncate(send=700_000), Truncate(send=10))
    result = download(url, tmp_path / "lt.zip", sleep=Sleeps())
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    ranges = [entry.range for entry in server.requests_to("/lt.zip")]
    assert ranges == [None, "bytes=700000-", "bytes=700010-"]
    assert result.bytes_transferred == SIZE


def test_wrong_content_fails_the_checksum_and_leaves_nothing(served, tmp_path):
    server, url = served
    server.script("/lt.zip", WrongContent())
    with pytest.raises(ChecksumMismatch) as caught:
        download(url, tmp_path / "lt.zip", sha256=SHA, sleep=Sleeps())
    assert SHA in str(caught.value) and url in str(caught.value)
    assert leftovers(tmp_path) == []


def test_html_page_instead_of_the_file_fails_the_size_check(served, tmp_path):
    server, url = served
    server.script("/lt.zip", WrongContent(data=b"<html>Access denied</html>"))
    with pytest.raises(SizeMismatch, match=str(SIZE)):
        download(url, tmp_path / "lt.zip", size=SIZE, sleep=Sleeps())
    assert leftovers(tmp_path) == []


def test_resumed_bytes_of_another_version_are_fetched_again_from_zero(served, tmp_path):
    server, url = served
    # The resumed tail is wrong (same validators): the checksum fails once, then
    # a full download from zero fixes it.
    server.script("/lt.zip", Drop(after=SIZE // 2), WrongContent())
    result = download(url, tmp_path / "lt.zip", sha256=SHA, sleep=Sleeps())
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    assert result.restarts == 1
    assert server.requests_to("/lt.zip")[-1].range is None


def test_404_is_a_clear_error_and_leaves_nothing(faulty_server, tmp_path):
    url = faulty_server.url("/libtorch/cu999/libtorch-9.9.9.zip")
    with pytest.raises(NotFound) as caught:
        download(url, tmp_path / "lt.zip", label="libtorch 9.9.9 (cu999)")
    error = caught.value
    assert url in str(error) and "404" in str(error) and "libtorch 9.9.9 (cu999)" in str(error)
    assert "FDL_LIBTORCH_MIRROR" in (error.hint or "")
    assert isinstance(error, NetworkError) and error.exit_code == 5
    assert leftovers(tmp_path) == []


def test_404_from_a_mirror_says_so(faulty_server, tmp_path):
    upstream = "https://download.pytorch.org/libtorch/cpu/libtorch-x.zip"
    with pytest.raises(NotFound) as caught:
        download(upstream, tmp_path / "lt.zip", mirror=faulty_server.url("/pt"))
    assert faulty_server.log[0].path == "/pt/libtorch/cpu/libtorch-x.zip"
    assert f"mirror of {upstream}" in str(caught.value)
    assert "mirror does not have" in (caught.value.hint or "")


def test_403_mentions_the_user_agent(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Status(403))
    with pytest.raises(NetworkError) as caught:
        download(url, tmp_path / "lt.zip", sleep=Sleeps())
    assert "403" in str(caught.value)
    assert "User-Agent 'fdl/" in (caught.value.hint or "")
    assert len(server.log) == 1  # not retried
    assert leftovers(tmp_path) == []


def test_ignored_range_restarts_from_zero(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Drop(after=SIZE // 2), IgnoreRange())
    result = download(url, tmp_path / "lt.zip", sha256=SHA, sleep=Sleeps())
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    second = server.requests_to("/lt.zip")[1]
    assert second.range is not None and second.status == 200 and second.sent == SIZE
    assert result.restarts == 1


def test_range_answered_at_the_wrong_offset_restarts(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Drop(after=SIZE // 2), BadRange())
    result = download(url, tmp_path / "lt.zip", sha256=SHA, sleep=Sleeps())
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    assert result.restarts == 1
    assert server.requests_to("/lt.zip")[-1].range is None


def test_part_left_by_an_earlier_run_is_resumed(served, tmp_path):
    server, url = served
    dest = tmp_path / "lt.zip"
    server.script("/lt.zip", Truncate(send=SIZE // 4))
    with pytest.raises(RetriesExhausted) as caught:
        download(url, dest, retry=RetryPolicy(attempts=1), sleep=Sleeps())
    assert "next run resumes" in (caught.value.hint or "")
    assert not dest.exists()
    assert leftovers(tmp_path) == ["lt.zip.part", "lt.zip.part.json"]

    server.clear_log()
    result = download(url, dest, sha256=SHA)
    assert dest.read_bytes() == DATA
    assert result.resumed_from == SIZE // 4
    assert result.bytes_transferred == SIZE - SIZE // 4 == server.sent("/lt.zip")
    assert server.log[0].range == f"bytes={SIZE // 4}-"
    assert leftovers(tmp_path) == ["lt.zip"]


def test_stale_part_with_another_etag_restarts(served, tmp_path):
    server, url = served
    dest = tmp_path / "lt.zip"
    server.script("/lt.zip", Truncate(send=SIZE // 2))
    with pytest.raises(RetriesExhausted):
        download(url, dest, retry=RetryPolicy(attempts=1), sleep=Sleeps())
    new = os.urandom(SIZE + 1000)
    server.add("/lt.zip", new)  # the file changed upstream: new ETag
    result = download(url, dest, sha256=hashlib.sha256(new).hexdigest())
    assert dest.read_bytes() == new
    assert result.resumed_from == 0 and result.restarts == 1
    assert server.log[-1].status == 200  # If-Range did not match


def test_part_without_validators_is_not_trusted_across_runs(faulty_server, tmp_path):
    url = faulty_server.add("/plain.bin", DATA, etag=False, last_modified=False)
    dest = tmp_path / "plain.bin"
    faulty_server.script("/plain.bin", Truncate(send=1000))
    with pytest.raises(RetriesExhausted):
        download(url, dest, retry=RetryPolicy(attempts=1), sleep=Sleeps())
    result = download(url, dest)
    assert dest.read_bytes() == DATA
    assert result.resumed_from == 0 and result.bytes_transferred == SIZE


def test_part_without_validators_is_resumed_when_a_checksum_guards_it(faulty_server, tmp_path):
    url = faulty_server.add("/plain.bin", DATA, etag=False, last_modified=False)
    dest = tmp_path / "plain.bin"
    faulty_server.script("/plain.bin", Truncate(send=1000))
    with pytest.raises(RetriesExhausted):
        download(url, dest, sha256=SHA, retry=RetryPolicy(attempts=1), sleep=Sleeps())
    result = download(url, dest, sha256=SHA)
    assert dest.read_bytes() == DATA
    assert result.resumed_from == 1000


def test_complete_part_is_finished_without_refetching(served, tmp_path):
    server, url = served
    dest = tmp_path / "lt.zip"
    server.script("/lt.zip", Truncate(send=SIZE - 1))
    with pytest.raises(RetriesExhausted):
        download(url, dest, retry=RetryPolicy(attempts=1), sleep=Sleeps())
    (tmp_path / "lt.zip.part").write_bytes(DATA)  # the last byte arrived before a crash
    server.clear_log()
    result = download(url, dest, sha256=SHA)
    assert dest.read_bytes() == DATA
    assert server.log[0].status == 416 and result.bytes_transferred == 0


def test_retries_exhausted_names_the_last_cause_and_keeps_nothing_at_dest(served, tmp_path):
    server, url = served
    server.always("/lt.zip", Status(503))
    sleeps = Sleeps()
    policy = RetryPolicy(attempts=5, base_delay=0.5, max_delay=2.0, jitter=0.0)
    with pytest.raises(RetriesExhausted) as caught:
        download(url, tmp_path / "lt.zip", retry=policy, sleep=sleeps)
    assert "HTTP 503" in caught.value.cause
    assert "after 5 attempts" in str(caught.value)
    assert sleeps == [0.5, 1.0, 2.0, 2.0]
    assert len(server.log) == 5
    assert not (tmp_path / "lt.zip").exists()


def test_connection_refused_is_retried_then_reported(tmp_path):
    with FaultyServer() as server:
        url = server.url("/x")
    # The server is gone: nothing listens on that port any more.
    sleeps = Sleeps()
    with pytest.raises(RetriesExhausted) as caught:
        download(url, tmp_path / "x", retry=RetryPolicy(attempts=3), sleep=sleeps)
    assert "Connection" in caught.value.cause
    assert len(sleeps) == 2


def test_drops_that_make_progress_do_not_exhaust_the_retries(served, tmp_path):
    server, url = served
    # Six drops with attempts=2: each one brings new bytes, so the download goes on.
    server.script("/lt.zip", *[Truncate(send=200_000)] * 6)
    result = download(
        url, tmp_path / "lt.zip", sha256=SHA, retry=RetryPolicy(attempts=2), sleep=Sleeps()
    )
    assert result.attempts == 7
    assert (tmp_path / "lt.zip").read_bytes() == DATA


def test_server_ignoring_ranges_and_dropping_runs_out_of_attempts(faulty_server, tmp_path):
    url = faulty_server.add("/norange.bin", DATA, ranges=False)
    faulty_server.always("/norange.bin", Truncate(send=SIZE // 2))
    with pytest.raises(RetriesExhausted):
        download(url, tmp_path / "x", retry=RetryPolicy(attempts=3), sleep=Sleeps())
    # Each restart from zero reaches the same point: no new bytes, no extra attempts.
    assert len(faulty_server.log) == 3


def test_stalled_body_times_out_and_resumes(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Stall(after=300_000, seconds=1.5))
    result = download(url, tmp_path / "lt.zip", sha256=SHA, timeout=(5, 0.2), sleep=Sleeps())
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    assert server.requests_to("/lt.zip")[1].range == "bytes=300000-"
    assert result.attempts >= 2


def test_progress_is_monotonic_and_reaches_the_total(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Trickle(chunk=50_000, delay=0.01))
    seen: list[Progress] = []
    download(url, tmp_path / "lt.zip", on_progress=seen.append)
    assert len(seen) >= 3
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert seen[-1].done == seen[-1].total == SIZE
    assert all(p.total == SIZE for p in seen)
    assert any(p.rate > 0 for p in seen)


def test_progress_stays_monotonic_across_a_resume(served, tmp_path):
    server, url = served
    server.script("/lt.zip", Truncate(send=SIZE // 3), Trickle(chunk=100_000, delay=0.02))
    seen: list[Progress] = []
    download(url, tmp_path / "lt.zip", on_progress=seen.append, sleep=Sleeps())
    dones = [p.done for p in seen]
    assert dones == sorted(dones) and dones[-1] == SIZE
    assert any(d > SIZE // 3 for d in dones[:-1])


def test_good_destination_is_not_fetched_again(served, tmp_path):
    server, url = served
    download(url, tmp_path / "lt.zip", sha256=SHA)
    server.clear_log()
    result = download(url, tmp_path / "lt.zip", sha256=SHA)
    assert (tmp_path / "lt.zip").stat().st_size == SIZE  # still there, whole
    assert server.log == [] and result.attempts == 0 and result.bytes_transferred == 0


def test_expected_size_mismatch_is_caught_before_the_body(served, tmp_path):
    _, url = served
    with pytest.raises(SizeMismatch, match="announces"):
        download(url, tmp_path / "lt.zip", size=SIZE + 1)
    assert leftovers(tmp_path) == []


def test_redirect_to_a_cdn_is_followed_and_resumed(served, tmp_path):
    server, _ = served
    server.always("/latest.zip", Status(302, location="/lt.zip"))
    server.script("/lt.zip", Drop(after=SIZE // 2))
    result = download(server.url("/latest.zip"), tmp_path / "lt.zip", sha256=SHA, sleep=Sleeps())
    assert (tmp_path / "lt.zip").read_bytes() == DATA
    target_requests = server.requests_to("/lt.zip")
    assert target_requests[1].range is not None and target_requests[1].status == 206
    assert result.bytes_transferred == SIZE
