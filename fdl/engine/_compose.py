"""Finding docker compose: the v2 plugin, else a standalone ``docker-compose``.

Compose v1 (``docker-compose`` 1.x, Python) talks to the daemon through
docker-py, which only has the classic builder, and shells out to the
``docker`` first on PATH for two things: ``docker build`` when
``COMPOSE_DOCKER_CLI_BUILD=1`` (the default of ``build`` and ``up`` in 1.28+,
but not of ``run``, which builds a missing image through docker-py) and
``docker start --attach`` for ``run``. So that v1 builds with BuildKit and
uses the client fdl chose, :func:`find_compose` returns an environment with
``COMPOSE_DOCKER_CLI_BUILD=1``, ``DOCKER_BUILDKIT`` set to what the chosen
client can do, and PATH starting with a directory whose ``docker`` is the
chosen client.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from fdl.engine._facts import docker_facts
from fdl.engine._paths import which_on
from fdl.engine._types import ClientSelection, ComposeCommand
from fdl.errors import EnvironmentProblem, FdlError
from fdl.runner import Runner

__all__ = ["find_compose", "shim_dir"]

_VERSION = re.compile(r"v?(\d+\.\d+(?:\.\d+)?\S*)")


def _version_in(text: str) -> str:
    found = _VERSION.search(text)
    return found.group(1) if found else ""


def find_compose(
    selection: ClientSelection,
    runner: Runner,
    environ: Mapping[str, str] | None = None,
    shim_root: Path | None = None,
) -> ComposeCommand:
    """How to run compose with the chosen docker client.

    Args:
        selection: The docker client choice (its clients are asked for the plugin,
            the chosen one first).
        runner: Runs the probes.
        environ: The environment compose will run in (default: this process's).
        shim_root: Where to put the ``docker`` link for compose v1 (default: fdl's
            cache directory).

    Raises:
        EnvironmentProblem: Neither ``docker compose`` nor ``docker-compose`` works.
    """
    env = os.environ if environ is None else environ
    tried: list[str] = []
    clients = [selection.client] + [c for c in selection.tried if c.path != selection.client.path]
    for client in clients:
        argv = [client.path, "compose"]
        answer = _ask([*argv, "version"], runner)
        if answer is not None:
            note = f"`{client.path} compose` (compose plugin {answer})"
            return ComposeCommand(tuple(argv), answer, "plugin", {}, (note, *tried))
        tried.append(f"`{client.path} compose version` failed (no compose plugin)")
    standalone = which_on("docker-compose", env)
    if standalone is None:
        tried.append("no `docker-compose` on PATH")
    else:
        answer = _ask([standalone, "version", "--short"], runner)
        if answer is not None:
            return _standalone(
                standalone, answer, selection=selection, env=env, shim_root=shim_root, tried=tried
            )
        tried.append(f"`{standalone} version` failed")
    raise EnvironmentProblem(
        "docker compose is not available: neither `docker compose` (the v2 plugin) nor "
        "`docker-compose` works",
        hint=docker_facts().compose_install,
        details="\n".join(tried),
    )


def _ask(argv: list[str], runner: Runner) -> str | None:
    try:
        done = runner.run(argv, check=False, timeout=30)
    except FdlError:
        return None
    if not done.ok:
        return None
    return _version_in(done.stdout) or "unknown"


def _standalone(
    path: str,
    version: str,
    *,
    selection: ClientSelection,
    env: Mapping[str, str],
    shim_root: Path | None,
    tried: list[str],
) -> ComposeCommand:
    notes = [f"`{path}` (docker-compose {version})", *tried]
    if not version.startswith("1."):
        return ComposeCommand((path,), version, "standalone", {}, tuple(notes))
    client = selection.client
    extra = {
        "COMPOSE_DOCKER_CLI_BUILD": "1",
        "DOCKER_BUILDKIT": "1" if client.builder.has_buildkit else "0",
    }
    on_path = which_on("docker", env)
    if on_path is None or os.path.realpath(on_path) != os.path.realpath(client.path):
        folder = shim_dir(client.path, shim_root)
        extra["PATH"] = os.pathsep.join([str(folder), env.get("PATH", "")])
        notes.append(f"compose v1 runs `docker` from PATH: {folder}/docker links to {client.path}")
    notes.append(
        "compose v1 builds through the docker CLI (COMPOSE_DOCKER_CLI_BUILD=1, "
        f"DOCKER_BUILDKIT={extra['DOCKER_BUILDKIT']})"
    )
    return ComposeCommand((path,), version, "standalone", extra, tuple(notes))


def shim_dir(client: str, root: Path | None = None) -> Path:
    """A directory holding only ``docker``, a link to ``client``.

    Put first on PATH, it makes programs that run "the docker on PATH"
    (compose v1) run the client fdl chose.
    """
    if root is None:
        from fdl.paths import cache_dir

        root = cache_dir() / "docker-shim"
    digest = hashlib.sha256(client.encode()).hexdigest()[:12]
    folder = root / digest
    link = folder / "docker"
    if link.is_symlink() and os.readlink(link) == client:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".docker.{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(client)
    os.replace(temporary, link)  # atomic: a concurrent fdl never sees a missing link
    return folder
