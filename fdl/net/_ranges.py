"""Reading a part of a remote file (HTTP Range, or a ``file://`` path): enough to read a
wheel's central directory and the members a variant needs without downloading the wheel."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from fdl._grammar import count
from fdl.errors import NetworkError
from fdl.net._deadline import DEADLINE_ENV, net_deadline
from fdl.net._results import Progress, ProgressCallback, RateMeter
from fdl.net._retry import RetryPolicy
from fdl.net._transport import Fatal, Transient, default_user_agent, open_transport

__all__ = ["fetch_range", "read_range"]


def read_range(
    url: str, start: int, length: int | None = None, *, timeout: float | None = None
) -> tuple[bytes, int]:
    """``length`` bytes of ``url`` from ``start`` (to the end when None), and the file's
    total size. ``start`` may be negative: that many bytes before the end. ``timeout``:
    seconds to connect and between two reads (default 15 and 120).

    Raises:
        NetworkError: the server cannot be reached, refuses, or ignores the range.
    """
    deadline = net_deadline()
    connect, between = (timeout, timeout) if timeout is not None else (15.0, 120.0)
    transport = open_transport(
        url,
        user_agent=default_user_agent(),
        timeout=(min(connect, deadline), min(between, deadline)),
    )
    try:
        if start < 0:
            _, total = _read(transport, url, 0, 1)
            start = max(0, total + start)
        return _read(transport, url, start, length)
    finally:
        transport.close()


# A server that ignores Range answers 200 with the whole file (or an endless body): read
# that far and no further. The files read whole this way are a wheel's tail, METADATA,
# RECORD; a whole wheel is hundreds of MB.
WHOLE_MAX = 32 << 20


def _body(response: object, url: str, limit: int, overall: float) -> bytes:
    """The body, at most ``limit`` bytes, within ``overall`` (a time.monotonic() instant):
    a drip of a byte a second ends too, not only a silence."""
    data = bytearray()
    for chunk in response.chunks(1 << 16):  # type: ignore[attr-defined]
        data += chunk
        if len(data) >= limit:
            break
        if time.monotonic() > overall:
            raise NetworkError(
                f"reading {url} took longer than {net_deadline():g} s ({len(data)} bytes came)",
                hint=f"run the same command again; to wait longer, set {DEADLINE_ENV}=SECONDS",
            )
    return bytes(data)


def _read(transport: object, url: str, start: int, length: int | None) -> tuple[bytes, int]:
    # a bounded range: an open one (bytes=N-) has the server send the rest of the file,
    # hundreds of MB of a wheel, until the connection is dropped
    last = "" if length is None else str(start + max(length, 1) - 1)
    headers = {"Range": f"bytes={start}-{last}"}
    try:
        response = transport.open(url, headers)  # type: ignore[attr-defined]
    except Transient as exc:
        raise NetworkError(f"cannot read {url}: {exc}", hint="run the same command again") from None
    except Fatal as exc:
        raise NetworkError(f"cannot read {url}: {exc}", hint=exc.hint) from None
    try:
        overall = time.monotonic() + net_deadline()
        if response.status == 200 and start == 0:  # no range support: the whole body
            whole = _body(response, url, WHOLE_MAX + 1, overall)
            if len(whole) > WHOLE_MAX:
                raise NetworkError(
                    f"{url} ignores Range requests and sends more than {WHOLE_MAX >> 20} MiB: "
                    "not read",
                    hint="the server must support HTTP Range (PyPI's file host does)",
                )
            return (whole if length is None else whole[:length]), len(whole)
        if response.status != 206:
            raise NetworkError(
                f"{url} answered {response.status} to a range request",
                hint="the server must support HTTP Range (PyPI's file host does)",
            )
        announced = str(response.header("Content-Range") or "")
        total_text = announced.rsplit("/", 1)[-1]
        total = count(total_text)
        if not announced.startswith(f"bytes {start}-") or total is None:
            raise NetworkError(
                f"{url} sent the range {announced!r}, not bytes {start}-{last}",
                hint="the server must support HTTP Range (PyPI's file host does)",
            )
        data = _body(response, url, WHOLE_MAX + 1 if length is None else length, overall)
        if length is None and len(data) > WHOLE_MAX:
            raise NetworkError(f"{url} sends more than {WHOLE_MAX >> 20} MiB for a range: not read")
        return data[:length] if length is not None else data, total
    except Transient as exc:
        raise NetworkError(
            f"reading {url} broke off: {exc}", hint="run the same command again"
        ) from None
    finally:
        response.close()


def fetch_range(
    url: str,
    dest: Path,
    start: int,
    length: int,
    *,
    on_progress: ProgressCallback | None = None,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Bytes ``start`` to ``start + length`` of ``url`` into ``dest``, with one Range request
    (more when the stream breaks: each resumes where the last stopped); ``dest`` appears
    only once complete. Reads at most ``length`` bytes whatever the server sends.

    Returns:
        The bytes received over the wire.

    Raises:
        NetworkError: the server refuses or ignores the range, sends a range other than the
            one asked for, breaks off more often in a row than ``retry`` tolerates (or more
            than its ``max_attempts`` in all), or sends nothing for ``$FDL_NET_DEADLINE``
            seconds.
    """
    policy = retry or RetryPolicy()
    deadline = net_deadline()
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    transport = open_transport(
        url, user_agent=default_user_agent(), timeout=(min(15.0, deadline), min(60.0, deadline))
    )
    state = _Received(length, on_progress)

    failures = attempts = 0
    try:
        with part.open("wb") as handle:
            while state.done < length:
                before = state.done
                attempts += 1
                try:
                    _stream_range(
                        transport, url, start + before, length - before, handle, state.arrived
                    )
                except Transient as exc:
                    failures = 0 if state.done > before else failures + 1
                    silent = time.monotonic() - state.last
                    # a server that sends a little and drops again must run out too
                    tried = attempts >= policy.max_attempts
                    if failures >= policy.attempts or tried or silent > deadline:
                        raise NetworkError(
                            f"reading {url} broke off ({exc}) after {state.done} of {length} bytes",
                            hint="run the same command again",
                        ) from None
                    sleep(policy.delay(max(failures, 1)))
                    continue
                if state.done == before:
                    raise NetworkError(f"{url} ended {length - before} bytes early")
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    finally:
        transport.close()
    part.replace(dest)
    return state.done


class _Received:
    """Bytes received so far, when the last one came, and the progress callback."""

    def __init__(self, length: int, on_progress: ProgressCallback | None) -> None:
        self.length, self.on_progress = length, on_progress
        self.done, self.last, self.meter = 0, time.monotonic(), RateMeter()

    def arrived(self, count: int) -> None:
        self.done += count
        self.last = now = time.monotonic()
        if self.on_progress is not None:
            self.on_progress(Progress(self.done, self.length, self.meter.add(now, self.done)))


def _stream_range(
    transport: object,
    url: str,
    start: int,
    length: int,
    handle: BinaryIO,
    arrived: Callable[[int], None],
) -> None:
    """One request for ``length`` bytes from ``start``, appended to ``handle``."""
    end = start + length - 1
    try:
        response = transport.open(url, {"Range": f"bytes={start}-{end}"})  # type: ignore[attr-defined]
    except Fatal as exc:
        raise NetworkError(f"cannot read {url}: {exc}", hint=exc.hint) from None
    try:
        if response.status in (408, 429) or response.status >= 500:
            raise Transient(f"HTTP {response.status}")
        if response.status != 206:
            raise NetworkError(
                f"{url} answered {response.status} to a range request",
                hint="the server must support HTTP Range (PyPI's file host does)",
            )
        announced = str(response.header("Content-Range") or "")
        if not announced.startswith(f"bytes {start}-"):
            raise NetworkError(f"{url} sent the range {announced!r}, not bytes {start}-{end}")
        got = 0
        for chunk in response.chunks(1 << 20):
            piece = chunk[: length - got]
            handle.write(piece)
            got += len(piece)
            arrived(len(piece))
            if got >= length:
                break
    finally:
        response.close()
