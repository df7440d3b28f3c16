"""Choosing the docker CLI to drive.

Several ``docker`` executables can be on PATH and they differ in what they can
build with: a client with the buildx plugin runs ``docker buildx build``; a
client older than 23.0 has BuildKit built in (``DOCKER_BUILDKIT=1 docker
build``); a newer client without buildx has only the classic builder, which
cannot run ``RUN --mount`` or secrets. fdl asks each candidate and takes the
best one whose daemon answers, remembering why for ``fdl diagnose``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fdl.engine._facts import docker_facts, version_tuple
from fdl.engine._paths import candidate_paths
from fdl.engine._types import Builder, ClientSelection, DockerClient
from fdl.errors import CommandFailed, EnvironmentProblem, FdlError
from fdl.runner import Runner

__all__ = [
    "candidate_paths",
    "needs_buildkit_error",
    "probe_client",
    "probe_clients",
    "select_client",
]

PROBE_TIMEOUT = 30.0


def probe_client(path: str, runner: Runner) -> DockerClient:
    """Ask one client its version, its daemon's version and whether it has buildx."""
    version, server, problem = _versions(path, runner)
    buildx = _buildx(path, runner)
    if buildx is not None:
        builder = Builder.BUILDX
    elif version and version_tuple(version) < docker_facts().builtin_buildkit_before:
        builder = Builder.BUILDKIT
    else:
        builder = Builder.CLASSIC
    return DockerClient(path, version, builder, buildx, server, problem)


def _versions(path: str, runner: Runner) -> tuple[str, str | None, str | None]:
    """(client version, server version or None, why no server)."""
    try:
        done = runner.run(
            [path, "version", "--format", "{{json .}}"], check=False, timeout=PROBE_TIMEOUT
        )
    except CommandFailed as exc:  # the runner's timeout
        return _client_version(path, runner), None, exc.message
    except FdlError as exc:
        return "", None, exc.message
    version, server = "", None
    try:
        data = json.loads(done.stdout.strip().splitlines()[0]) if done.stdout.strip() else {}
    except (ValueError, IndexError):
        data = {}
    if isinstance(data, dict):
        version = str((data.get("Client") or {}).get("Version") or "")
        server_data = data.get("Server") or {}
        server = str(server_data.get("Version") or "") or None
    if not version:
        version = _client_version(path, runner)
    problem = None
    if server is None:
        problem = _last_line(done.stderr) or f"`{path} version` exited with {done.returncode}"
    return version, server, problem


def _client_version(path: str, runner: Runner) -> str:
    """``Docker version 20.10.24+dfsg1, build 297e128`` -> ``20.10.24+dfsg1``."""
    try:
        done = runner.run([path, "--version"], check=False, timeout=PROBE_TIMEOUT)
    except FdlError:
        return ""
    words = done.stdout.replace(",", " ").split()
    if len(words) >= 3 and words[1] == "version":
        return words[2]
    return ""


def _buildx(path: str, runner: Runner) -> str | None:
    try:
        done = runner.run([path, "buildx", "version"], check=False, timeout=PROBE_TIMEOUT)
    except FdlError:
        return None
    if not done.ok:
        return None
    return _last_line(done.stdout) or "buildx"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def probe_clients(
    runner: Runner, environ: Mapping[str, str] | None = None
) -> ClientSelection | None:
    """Ask every candidate; None when there is no docker executable at all.

    The returned selection's ``client`` is the best candidate even when no
    daemon answered (check ``client.usable``); :func:`select_client` raises instead.
    """
    paths, source = candidate_paths(environ)
    if not paths:
        return None
    tried = tuple(probe_client(path, runner) for path in paths)
    usable = [c for c in tried if c.usable] or list(tried)
    # min() keeps the first of equals: PATH order breaks ties.
    best = min(usable, key=lambda c: c.builder.rank)
    return ClientSelection(best, tried, source)


def select_client(runner: Runner, environ: Mapping[str, str] | None = None) -> ClientSelection:
    """The best docker client whose daemon answers.

    Raises:
        EnvironmentProblem: No docker executable, or no daemon answers any of them.
    """
    selection = probe_clients(runner, environ)
    if selection is None:
        raise EnvironmentProblem(
            "no docker client found: there is no `docker` on PATH",
            hint="install docker (https://docs.docker.com/engine/install/), or set FDL_DOCKER "
            "to the docker CLI to use",
        )
    if not selection.client.usable:
        raise EnvironmentProblem(
            "no docker daemon answers (`docker version` failed for every client tried)",
            hint="start the daemon (`sudo systemctl start docker`, or `dockerd &`), check "
            "DOCKER_HOST and `docker context ls`, or set FDL_DOCKER to a client that reaches it",
            details="\n".join(f"tried {c.path}: {c.problem}" for c in selection.tried),
        )
    return selection


def needs_buildkit_error(selection: ClientSelection, why: str) -> EnvironmentProblem:
    """The error for a build that needs BuildKit when no client here has it."""
    facts = docker_facts()
    before = ".".join(str(n) for n in facts.builtin_buildkit_before)
    return EnvironmentProblem(
        f"this build needs BuildKit ({why}), but no docker client here can build with it",
        hint=f"{facts.buildx_install}; or set FDL_DOCKER to a docker client older than "
        f"{before}, which has BuildKit built in (Debian's docker.io package installs one "
        "as /usr/bin/docker)",
        details="\n".join(f"tried {c.describe()}" for c in selection.tried),
    )
