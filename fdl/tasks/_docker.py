"""Which compose program to run, and whether fdl already runs inside a container.

:func:`compose_argv` is the one place that picks the compose program, so it
can later defer to ``fdl.engine``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from fdl.errors import EnvironmentProblem
from fdl.runner import Runner, default_runner

__all__ = ["compose_argv", "in_container"]

_MARKERS = ("/.dockerenv", "/run/.containerenv")


def in_container(environ: Mapping[str, str], markers: tuple[str, ...] = _MARKERS) -> bool:
    """Whether fdl runs inside a container (so ``docker:`` commands run directly).

    ``FDL_IN_CONTAINER=1`` or ``0`` overrides the detection (``/.dockerenv``,
    ``/run/.containerenv``).
    """
    forced = environ.get("FDL_IN_CONTAINER", "").strip().lower()
    if forced in ("1", "true", "yes"):
        return True
    if forced in ("0", "false", "no"):
        return False
    return any(Path(marker).exists() for marker in markers)


def compose_argv(
    runner: Runner | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The command that runs compose: ``docker compose`` (v2 plugin), else ``docker-compose``.

    ``FDL_COMPOSE`` (e.g. ``docker-compose`` or ``podman compose``) overrides the choice.

    Raises:
        EnvironmentProblem: neither is installed.
    """
    runner = runner or default_runner()
    forced = (environ or {}).get("FDL_COMPOSE", "").strip()
    if forced:
        return shlex.split(forced)
    if runner.which("docker") is not None:
        try:
            probe = runner.run(["docker", "compose", "version"], check=False, timeout=30)
        except EnvironmentProblem:
            probe = None
        if probe is not None and probe.ok:
            return ["docker", "compose"]
    if runner.which("docker-compose") is not None:
        return ["docker-compose"]
    raise EnvironmentProblem(
        "cannot run docker compose: neither the `docker compose` plugin (compose v2) "
        "nor the `docker-compose` program (v1) is installed",
        hint="install the docker compose plugin (e.g. apt install docker-compose-plugin) "
        "or docker-compose, or set FDL_COMPOSE to your compose command",
    )
