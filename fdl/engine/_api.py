"""What the Engine API serves better than the docker CLI, through the docker SDK
(``docker`` on PyPI, imported only when one of these is called): an image's exact size
and the part shared with other images (``docker system df`` prints rounded text), its
inspection and history (configuration, labels, layers) and its export (``save``) as a
stream. Builds stay on the CLI: BuildKit's features are only reachable there.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fdl.errors import EnvironmentProblem

__all__ = ["NoSuchImage", "history", "image_sizes", "inspect", "save"]

DEFAULT_HOST = "unix:///var/run/docker.sock"
_TIMEOUT = 60  # the daemon computes the disk usage of every image: it can take a while
_CHUNK = 1 << 20


class NoSuchImage(Exception):
    """The daemon has no such image."""


def _daemon_problem(address: str, what: str, hint: str) -> EnvironmentProblem:
    """An SDK failure, naming the daemon at ``address``."""
    return EnvironmentProblem(f"the docker daemon at {address} {what}", hint=hint)


@contextmanager
def _client(address: str) -> Iterator[Any]:
    """A low-level SDK client of the daemon at ``address``; the SDK's failures become
    an EnvironmentProblem naming the daemon (a missing image: :class:`NoSuchImage`)."""
    import docker
    import docker.errors
    import requests

    if not address.startswith(("unix://", "tcp://", "http://", "https://")):
        raise EnvironmentProblem(
            f"fdl cannot ask the docker daemon at {address} (only unix:// and tcp://)",
            hint="set DOCKER_HOST to a unix:// or tcp:// address",
        )
    failures = (docker.errors.DockerException, requests.RequestException)
    try:
        client = docker.APIClient(base_url=address, version="auto", timeout=_TIMEOUT)
    except failures as exc:
        hint = "start it (`sudo systemctl start docker`) and check `docker version`"
        raise _daemon_problem(address, f"does not answer: {exc}", hint) from None
    try:
        yield client
    except docker.errors.NotFound as exc:
        raise NoSuchImage(str(exc)) from None
    except failures as exc:
        hint = "check that the daemon answers (`docker system df`)"
        raise _daemon_problem(address, f"refused a request: {exc}", hint) from None
    finally:
        client.close()


def image_sizes(image_id: str, address: str | None, environ: Mapping[str, str]) -> tuple[int, int]:
    """(size, shared size) in bytes of one image, from the daemon's disk-usage report.

    Args:
        image_id: The full image id (``sha256:...``).
        address: The daemon address (the CLI's context); None: ``$DOCKER_HOST``, else the
            default socket.
        environ: Where ``DOCKER_HOST`` is read.

    Raises:
        EnvironmentProblem: The daemon cannot be asked, or does not list the image.
    """
    host = address or environ.get("DOCKER_HOST") or DEFAULT_HOST
    with _client(host) as client:
        usage = client.df()
    images = usage.get("Images") if isinstance(usage, dict) else None
    for image in images if isinstance(images, list) else []:
        if isinstance(image, dict) and image.get("Id") == image_id:
            size = int(image.get("Size") or 0)
            shared = int(image.get("SharedSize") or 0)
            return size, max(shared, 0)  # -1 means "not computed"
    raise EnvironmentProblem(
        f"the daemon's disk-usage report does not list image {image_id}",
        hint="check that it still exists (`docker image ls`)",
    )


def inspect(address: str, ref: str) -> dict[str, Any]:
    """The image's inspection, as ``docker image inspect`` prints it (one object).

    Raises:
        NoSuchImage: the daemon has no image ``ref``.
        EnvironmentProblem: the daemon cannot be asked.
    """
    with _client(address) as client:
        raw = client.inspect_image(ref)
    return raw if isinstance(raw, dict) else {}


def history(address: str, image_id: str) -> list[dict[str, Any]]:
    """The image's layers, newest first: ``CreatedBy``, ``Size``, ``CreatedAt`` (RFC 3339,
    as the CLI prints it) and ``Comment``."""
    with _client(address) as client:
        entries = client.history(image_id)
    out: list[dict[str, Any]] = []
    for entry in entries if isinstance(entries, list) else []:
        created = entry.get("Created")
        when = (
            datetime.datetime.fromtimestamp(created, tz=datetime.timezone.utc).isoformat()
            if isinstance(created, (int, float))
            else str(created or "")
        )
        out.append({**entry, "CreatedAt": when})
    return out


def save(address: str, ref: str, dest: Path) -> Path:
    """Export ``ref`` as a ``docker save`` tar into ``dest``, streamed.

    Raises:
        NoSuchImage: the daemon has no image ``ref``.
        EnvironmentProblem: the daemon cannot be asked.
    """
    with _client(address) as client, dest.open("wb") as out:
        for chunk in client.get_image(ref, chunk_size=_CHUNK):
            out.write(chunk)
    return dest
