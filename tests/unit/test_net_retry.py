"""Pure parts of the downloader: backoff, Retry-After, URLs, Content-Range."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdl import __version__
from fdl.net import RetryPolicy, default_user_agent, file_url_path, rebase_url
from fdl.net._request import content_range
from fdl.net._retry import is_retryable_status, parse_retry_after
from fdl.net._transport import Fatal


@given(
    failures=st.integers(min_value=1, max_value=10_000),
    base=st.floats(min_value=0, max_value=10),
    cap=st.floats(min_value=0, max_value=120),
    jitter=st.floats(min_value=0, max_value=1),
    seed=st.integers(),
)
def test_delay_is_bounded_and_never_negative(failures, base, cap, jitter, seed):
    policy = RetryPolicy(base_delay=base, max_delay=cap, jitter=jitter)
    delay = policy.delay(failures, rng=random.Random(seed))
    assert 0.0 <= delay <= cap


def test_delay_grows_exponentially_without_jitter():
    policy = RetryPolicy(base_delay=0.5, multiplier=2.0, max_delay=5.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_spreads_delays_below_the_nominal_value():
    policy = RetryPolicy(base_delay=4.0, jitter=0.5)
    rng = random.Random(1)
    delays = {round(policy.delay(1, rng=rng), 6) for _ in range(50)}
    assert len(delays) > 40
    assert all(2.0 <= delay <= 4.0 for delay in delays)


def test_retry_after_is_honoured_but_capped():
    policy = RetryPolicy(max_delay=10.0)
    assert policy.delay(1, retry_after=3.0) == 3.0
    assert policy.delay(1, retry_after=3600.0) == 10.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("7", 7.0), ("0", 0.0), (None, None), ("", None), ("soon", None)],
)
def test_parse_retry_after_seconds(value, expected):
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date_in_the_past_is_zero():
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429, 408])
def test_transient_statuses_are_retried(status):
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 416])
def test_client_errors_are_not_retried(status):
    assert not is_retryable_status(status)


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(jitter=2.0)


def test_user_agent_names_fdl_and_its_version():
    agent = default_user_agent()
    assert agent.startswith(f"fdl/{__version__} (+https://")
    assert "urllib" not in agent.lower()


UPSTREAM = "https://download.pytorch.org/libtorch/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip"


def test_mirror_keeps_the_upstream_path():
    assert rebase_url(UPSTREAM, "https://mirror.example/pytorch/") == (
        "https://mirror.example/pytorch/libtorch/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip"
    )


def test_file_mirror():
    assert rebase_url(UPSTREAM, "file:///srv/mirror") == (
        "file:///srv/mirror/libtorch/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip"
    )


def test_mirror_with_explicit_upstream_prefix():
    mirrored = rebase_url(
        UPSTREAM, "https://m.example/libtorch", upstream="https://download.pytorch.org/libtorch/"
    )
    assert (
        mirrored == "https://m.example/libtorch/cu128/libtorch-shared-with-deps-2.8.0%2Bcu128.zip"
    )


def test_file_url_path_decodes_escapes():
    assert file_url_path("file:///srv/a%2Bb/x%20y.zip") == Path("/srv/a+b/x y.zip")
    assert file_url_path("file://localhost/srv/x.zip") == Path("/srv/x.zip")


def test_file_url_with_a_host_is_refused():
    with pytest.raises(Fatal, match="local path"):
        file_url_path("file://server/share/x.zip")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes 100-199/200", (100, 199, 200)),
        ("bytes 0-0/1", (0, 0, 1)),
        ("bytes */200", (None, None, 200)),
        ("bytes 5-9/*", (5, 9, None)),
        (None, (None, None, None)),
        ("items 1-2/3", (None, None, None)),
    ],
)
def test_content_range(header, expected):
    assert content_range(header) == expected
