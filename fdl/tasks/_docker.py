"""Which compose program to run, and whether fdl already runs inside a container.

:func:`compose_program` is the one place that picks the compose program; it
asks :mod:`fdl.engine`, which also knows the docker client compose must use.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from fdl.errors import EnvironmentProblem
from fdl.tasks._env import EnvChange

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from fdl.engine import Engine
    from fdl.runner import Runner

__all__ = ["ComposeProgram", "compose_program", "in_container", "recheck_engine"]

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


class ComposeProgram:
    """The compose command line prefix and the variables it must run with; ``remembered``
    when it came from an earlier run's probes (fdl.engine._memory), not asked this run."""

    __slots__ = ("argv", "env", "remembered")

    def __init__(self, argv: list[str], env: list[EnvChange], remembered: bool = False) -> None:
        self.argv = argv
        self.env = env
        self.remembered = remembered


def _split_forced(text: str) -> list[str]:
    """``$FDL_COMPOSE`` split like a shell would.

    Raises:
        EnvironmentProblem: the text cannot be split (unbalanced quote or escape).
    """
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise EnvironmentProblem(
            f"FDL_COMPOSE={text[:200]!r}: {exc}",
            hint="quote it like a shell command line, e.g. FDL_COMPOSE='podman compose'",
        ) from None
    if not argv:
        raise EnvironmentProblem(
            f"FDL_COMPOSE={text[:200]!r} names no program",
            hint="set it to a compose command such as 'docker compose', or unset it",
        )
    return argv


def compose_program(
    runner: Runner | None = None,
    environ: Mapping[str, str] | None = None,
    engine: Engine | None = None,
) -> ComposeProgram:
    """How to run compose: what :mod:`fdl.engine` found (plugin, else compose v1).

    For compose v1 the engine adds variables (``COMPOSE_DOCKER_CLI_BUILD``,
    ``DOCKER_BUILDKIT`` and a PATH entry whose ``docker`` is the client fdl
    chose) so that v1 builds and runs with that client. ``FDL_COMPOSE`` (e.g.
    ``podman compose``) overrides the choice.

    Raises:
        EnvironmentProblem: no docker client answers, no compose is installed,
            or ``FDL_COMPOSE`` is not a command line (an unbalanced quote).
    """
    forced = (environ or {}).get("FDL_COMPOSE", "").strip()
    if forced:
        return ComposeProgram(_split_forced(forced), [])
    if engine is None:
        from fdl.runner import SubprocessRunner, default_runner

        runner = runner or default_runner()
        if isinstance(runner, SubprocessRunner):
            # what an earlier run learned, without the engine's modules (start-up time)
            from fdl.engine import recall_compose

            kept = recall_compose(os.environ if environ is None else environ)
            if kept is not None:
                return ComposeProgram(list(kept[0]), _changes(kept[1]), remembered=True)
        from fdl.engine import DockerEngine

        engine = DockerEngine(runner=runner, environ=environ)
    command = engine.compose()
    remembered = getattr(engine, "remembered", False)
    return ComposeProgram(list(command.argv), _changes(command.env), remembered)


def _changes(variables: Mapping[str, str]) -> list[EnvChange]:
    changes: list[EnvChange] = []
    for name, value in sorted(variables.items()):
        if name == "PATH":
            # The engine puts its shim directory first: keep only that entry.
            changes.append(EnvChange("PATH", value.split(os.pathsep)[0], prepend=True))
        else:
            changes.append(EnvChange(name, value))
    return changes


def recheck_engine(argv: list[str], environ: Mapping[str, str]) -> str | None:
    """After ``compose run`` failed on remembered answers: ask docker again, so that what is
    wrong with the engine is said with its fix (the command's own failure needs nothing).

    Args:
        argv: The compose program the command ran with.
        environ: The environment it ran in.

    Returns:
        A note when docker's answers have changed since they were kept (run again), else
        None.

    Raises:
        EnvironmentProblem: no docker client or daemon answers, or no compose works.
    """
    from fdl.engine import DockerEngine

    engine = DockerEngine(environ=environ, remember=True)
    engine.forget()
    now = engine.compose()
    if list(now.argv) == argv:
        return None
    return (
        f"docker changed since fdl last asked it: compose is now `{' '.join(now.argv)}`, "
        f"the command ran `{' '.join(argv)}`; run it again"
    )
