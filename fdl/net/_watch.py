"""A total deadline for one HTTP exchange, and a bounded body.

requests' timeouts count the time between two bytes, so a server that sends its headers
or its body a byte at a time holds a request for ever. :func:`watched_session` makes a
session whose connections report their sockets; :func:`deadline` starts a timer that,
when the exchange (headers and the body read under it) has not ended in time, shuts
those sockets down, so the blocked read returns and the exchange fails with a
:class:`DeadlineExceeded`. :func:`read_body` reads a body up to a bound.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["DeadlineExceeded", "TooLarge", "deadline", "read_body", "watched_session"]

_local = threading.local()


class DeadlineExceeded(Exception):
    """The exchange did not end within its deadline (``seconds``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"not finished within {seconds:g} s")
        self.seconds = seconds


class TooLarge(Exception):
    """A body longer than its bound."""


def _watch(sock: Any) -> None:
    watched = getattr(_local, "sockets", None)
    if watched is not None and sock is not None:
        watched.append(sock)


_adapter: list[Any] = []


def _adapter_class() -> Any:
    """An HTTPAdapter whose (direct) connections report their sockets to the running
    :func:`deadline` of their thread. Made once, on first use (urllib3 is imported lazily)."""
    if _adapter:
        return _adapter[0]
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class _Http(HTTPConnection):
        def connect(self) -> None:
            super().connect()
            _watch(self.sock)

        def request(self, *args: Any, **kwargs: Any) -> None:
            super().request(*args, **kwargs)
            _watch(self.sock)  # a pooled connection, reused: connect() was not called

    # _Http's methods first, then HTTPSConnection's (their super() is its connect()).
    class _Https(_Http, HTTPSConnection):
        pass

    class _HttpPool(HTTPConnectionPool):
        ConnectionCls = _Http

    class _HttpsPool(HTTPSConnectionPool):
        ConnectionCls = _Https

    class _Adapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": _HttpPool, "https": _HttpsPool}

    _adapter.append(_Adapter)
    return _Adapter


def watched_session() -> Any:
    """A requests session that :func:`deadline` can cut."""
    import requests

    session = requests.Session()
    adapter = _adapter_class()
    session.mount("http://", adapter())
    session.mount("https://", adapter())
    return session


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Run an exchange in ``seconds`` at most; past them its sockets are shut down and
    whatever the exchange raised becomes :class:`DeadlineExceeded`."""
    watched: list[Any] = []
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        for sock in list(watched):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    outer = getattr(_local, "sockets", None)
    _local.sockets = watched
    timer = threading.Timer(seconds, cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as exc:
        if fired.is_set() and not isinstance(exc, DeadlineExceeded):
            raise DeadlineExceeded(seconds) from None
        raise
    finally:
        timer.cancel()
        _local.sockets = outer
    if fired.is_set():
        raise DeadlineExceeded(seconds)


def read_body(answer: Any, limit: int) -> bytes:
    """The body of a streamed response, refused past ``limit`` bytes (TooLarge), read as it
    arrives (so that :func:`deadline` counts a body trickled a byte at a time)."""
    data = bytearray()
    raw = answer.raw
    reader = getattr(raw, "read1", None) or raw.read
    while chunk := reader(1 << 16):
        data += chunk
        if len(data) > limit:
            answer.close()
            raise TooLarge(f"more than {limit} bytes")
    return bytes(data)
