"""The one question the docker CLI cannot answer exactly: an image's size and the part of it
shared with other images, in bytes (``docker system df`` prints rounded text). Asked of the
Engine API directly (``GET /system/df``) over the daemon's socket, with the standard
library: no SDK to install and import for one call.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

from fdl.errors import EnvironmentProblem

__all__ = ["image_sizes"]

DEFAULT_HOST = "unix:///var/run/docker.sock"
_TIMEOUT = 60.0  # the daemon computes the disk usage of every image: it can take a while


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the daemon's usual address)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def _connection(host: str) -> http.client.HTTPConnection:
    parts = urlsplit(host)
    if parts.scheme == "unix":
        return _UnixConnection(parts.path, _TIMEOUT)
    if parts.scheme in ("tcp", "http"):
        return http.client.HTTPConnection(
            parts.hostname or "localhost", parts.port, timeout=_TIMEOUT
        )
    raise EnvironmentProblem(
        f"fdl cannot ask the docker daemon at {host} for image sizes (only unix:// and tcp://)",
        hint="measure on a machine whose daemon is local, or set DOCKER_HOST to a unix:// "
        "or tcp:// address",
    )


def _disk_usage(host: str) -> dict[str, object]:
    connection = _connection(host)
    try:
        connection.request("GET", "/system/df", headers={"Accept": "application/json"})
        response = connection.getresponse()
        body = response.read()
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot ask the docker daemon at {host} for disk usage: {exc}",
            hint="check that the daemon answers (`docker system df`)",
        ) from None
    finally:
        connection.close()
    if response.status != 200:
        raise EnvironmentProblem(
            f"the docker daemon at {host} refused the disk-usage request (HTTP {response.status})",
            hint="check that the daemon answers (`docker system df`)",
            details=body.decode("utf-8", "replace")[:500],
        )
    data = json.loads(body)
    return data if isinstance(data, dict) else {}


def image_sizes(image_id: str, host: str | None, environ: Mapping[str, str]) -> tuple[int, int]:
    """(size, shared size) in bytes of one image, from the daemon's disk-usage report.

    Args:
        image_id: The full image id (``sha256:...``).
        host: The daemon address (the CLI's context); None: ``$DOCKER_HOST``, else the
            default socket.
        environ: Where ``DOCKER_HOST`` is read.

    Raises:
        EnvironmentProblem: The daemon cannot be asked, or does not list the image.
    """
    address = host or environ.get("DOCKER_HOST") or DEFAULT_HOST
    images = _disk_usage(address).get("Images") or []
    for image in images if isinstance(images, list) else []:
        if isinstance(image, dict) and image.get("Id") == image_id:
            size = int(image.get("Size") or 0)
            shared = int(image.get("SharedSize") or 0)
            return size, max(shared, 0)  # -1 means "not computed"
    raise EnvironmentProblem(
        f"the daemon's disk-usage report does not list image {image_id}",
        hint="check that it still exists (`docker image ls`)",
    )
