"""Reading a part of a remote file (HTTP Range, or a ``file://`` path): enough to read a
wheel's central directory and one member without downloading the wheel."""

from __future__ import annotations

from fdl.errors import NetworkError
from fdl.net._deadline import net_deadline
from fdl.net._transport import Fatal, Transient, default_user_agent, open_transport

__all__ = ["read_range"]


def read_range(url: str, start: int, length: int | None = None) -> tuple[bytes, int]:
    """``length`` bytes of ``url`` from ``start`` (to the end when None), and the file's
    total size. ``start`` may be negative: that many bytes before the end.

    Raises:
        NetworkError: the server cannot be reached, refuses, or ignores the range.
    """
    deadline = net_deadline()
    transport = open_transport(
        url, user_agent=default_user_agent(), timeout=(min(15.0, deadline), min(120.0, deadline))
    )
    try:
        if start < 0:
            _, total = _read(transport, url, 0, 1)
            start = max(0, total + start)
        return _read(transport, url, start, length)
    finally:
        transport.close()


def _read(transport: object, url: str, start: int, length: int | None) -> tuple[bytes, int]:
    try:
        response = transport.open(url, {"Range": f"bytes={start}-"})  # type: ignore[attr-defined]
    except (Transient, Fatal) as exc:
        raise NetworkError(f"cannot read {url}: {exc}") from None
    try:
        if response.status == 200 and start == 0:  # no range support: the whole body
            whole = b"".join(response.chunks(1 << 16))
            return (whole if length is None else whole[:length]), len(whole)
        if response.status != 206:
            raise NetworkError(
                f"{url} answered {response.status} to a range request",
                hint="the server must support HTTP Range (PyPI's file host does)",
            )
        total = int(str(response.header("Content-Range")).rsplit("/", 1)[-1])
        data = bytearray()
        for chunk in response.chunks(1 << 16):
            data += chunk
            if length is not None and len(data) >= length:
                break
        return bytes(data if length is None else data[:length]), total
    except Transient as exc:
        raise NetworkError(f"reading {url} broke off: {exc}") from None
    finally:
        response.close()
