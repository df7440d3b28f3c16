"""A server that accepts the connection and never answers: every network operation ends
within its deadline ($FDL_NET_DEADLINE) in a network error (exit 5) with the fix, instead
of staying silent for the read timeout of every retry."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.errors import NetworkError, UsageError
from fdl.net import download, net_deadline, read_range
from fdl.net._retry import RetryPolicy


@pytest.fixture
def silent_server() -> Iterator[str]:
    """127.0.0.1:PORT that accepts every connection and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)  # kept open, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def test_a_download_from_a_silent_mirror_ends_at_the_deadline(
    silent_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_NET_DEADLINE", "1")
    slept: list[float] = []
    # Without a deadline: six attempts of a 60 s read timeout each, plus backoff.
    with pytest.raises(NetworkError) as caught:
        download(
            f"{silent_server}/libtorch.zip",
            tmp_path / "libtorch.zip",
            retry=RetryPolicy(),
            sleep=slept.append,
        )
    assert "nothing received for 1 s" in caught.value.message
    assert "FDL_NET_DEADLINE" in (caught.value.hint or "")
    assert caught.value.exit_code == 5
    assert slept == []  # no backoff past the deadline


def test_a_range_read_from_a_silent_server_ends_at_the_deadline(
    silent_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_NET_DEADLINE", "1")
    with pytest.raises(NetworkError):
        read_range(f"{silent_server}/torch.whl", -100)


def test_libtorch_download_from_a_silent_mirror_exits_5(
    run_fdl, silent_server: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    env = {
        "FDL_NET_DEADLINE": "1",
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
    }
    result = run_fdl(
        ["libtorch", "download", "--cpu", "--mirror", silent_server],
        cwd=tmp_path,
        env=env,
    )
    assert result.exit_code == 5, result.output
    assert "nothing received for 1 s" in result.output and "FDL_NET_DEADLINE" in result.output


@pytest.mark.parametrize("value", ["abc", "0", "-1", "inf", "nan"])
def test_a_deadline_that_is_not_seconds_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="FDL_NET_DEADLINE"):
        net_deadline({"FDL_NET_DEADLINE": value})
    assert net_deadline({}) == 300.0
