"""Random fault schedules always end in the exact bytes or in a clean error."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdl.errors import NetworkError
from fdl.net import RetryPolicy, download
from tests.support.faulty_http import (
    BadRange,
    Drop,
    FaultyServer,
    IgnoreRange,
    Status,
    Truncate,
    WrongContent,
)

SIZE = 256_000
DATA = os.urandom(SIZE)
SHA = hashlib.sha256(DATA).hexdigest()
POLICY = RetryPolicy(attempts=3, max_attempts=12, base_delay=0.0, jitter=0.0)

offsets = st.integers(min_value=0, max_value=SIZE)
transient = st.one_of(
    st.builds(Drop, after=offsets, settle=st.just(0.0)),
    st.builds(Truncate, send=offsets),
    st.builds(Status, code=st.sampled_from([500, 502, 503, 504, 408, 429])),
    st.just(IgnoreRange()),
    st.just(BadRange()),
    st.none(),
)
fatal = st.one_of(st.builds(Status, code=st.sampled_from([403, 404, 410])), st.just(WrongContent()))


def _run(schedule: list, *, sha256: str | None, validators: bool) -> None:
    with FaultyServer() as server, tempfile.TemporaryDirectory() as tmp:
        url = server.add("/f", DATA, etag=validators, last_modified=validators)
        server.script("/f", *schedule)
        dest = Path(tmp) / "f"
        try:
            result = download(url, dest, sha256=sha256, retry=POLICY, sleep=lambda _: None)
        except NetworkError as error:
            assert error.message and error.hint is not None
            assert not dest.exists()
            assert not (Path(tmp) / "f.part.json").exists() or (Path(tmp) / "f.part").exists()
        else:
            assert dest.read_bytes() == DATA
            assert result.sha256 == SHA and result.size == SIZE
            assert sorted(p.name for p in Path(tmp).iterdir()) == ["f", "f.lock"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=st.lists(st.one_of(transient, fatal), max_size=7))
def test_with_checksum_any_schedule_gives_exact_bytes_or_a_clean_error(schedule):
    _run(schedule, sha256=SHA, validators=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=st.lists(transient, max_size=7), validators=st.booleans())
def test_without_checksum_transient_faults_never_corrupt_the_file(schedule, validators):
    _run(schedule, sha256=None, validators=validators)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=st.lists(transient, max_size=2))
def test_a_few_transient_faults_are_always_overcome(schedule):
    # Two faults cannot exhaust three consecutive attempts: the download must succeed.
    with FaultyServer() as server, tempfile.TemporaryDirectory() as tmp:
        url = server.add("/f", DATA)
        server.script("/f", *schedule)
        result = download(url, Path(tmp) / "f", sha256=SHA, retry=POLICY, sleep=lambda _: None)
        assert (Path(tmp) / "f").read_bytes() == DATA and result.attempts <= 3
