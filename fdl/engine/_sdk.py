"""The few questions fdl asks the daemon through the docker SDK (imported lazily)."""

from __future__ import annotations

from collections.abc import Mapping

from fdl.errors import EnvironmentProblem

__all__ = ["image_sizes"]


def image_sizes(image_id: str, endpoint: str | None, environ: Mapping[str, str]) -> tuple[int, int]:
    """(size, shared size) in bytes of one image, from the daemon's disk-usage report.

    Args:
        image_id: The full image id (``sha256:...``).
        endpoint: The daemon address; None reads DOCKER_HOST from ``environ``.
        environ: The environment for the SDK's settings.

    Raises:
        EnvironmentProblem: The daemon cannot be asked, or does not list the image.
    """
    import docker

    try:
        if endpoint is None:
            client = docker.from_env(version="auto", environment=dict(environ))
        else:
            client = docker.DockerClient(base_url=endpoint, version="auto")
        try:
            report = client.df()
        finally:
            client.close()
    except docker.errors.DockerException as exc:
        raise EnvironmentProblem(
            "cannot ask the docker daemon for disk usage",
            hint="check that the daemon answers (`docker system df`)",
            details=str(exc),
        ) from None
    for image in report.get("Images") or []:
        if image.get("Id") == image_id:
            size = int(image.get("Size") or 0)
            shared = int(image.get("SharedSize") or 0)
            return size, max(shared, 0)  # -1 means "not computed"
    raise EnvironmentProblem(
        f"the daemon's disk-usage report does not list image {image_id}",
        hint="check that it still exists (`docker image ls`)",
    )
