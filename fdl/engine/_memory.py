"""What the docker probes learned, kept in fdl's cache between runs.

Choosing a client and a compose program asks docker three times or more (``version``,
``buildx version``, ``compose version``: 30-400 ms); a project command then needs one call,
``compose run``. So the answers are kept per engine in ``<cache>/engine-probes/``, under a
key of everything they depend on that a stat can see: each candidate client (path, inode,
size, times), ``docker-compose`` on PATH, the CLI plugin folders, docker's config file (the
current context), PATH and the ``DOCKER_*`` variables. Another binary, context or host is a
new key, so it is asked anew. Only answers that worked are kept (a daemon answered, compose
was found); a file that is damaged, a link, a FIFO or anything but a small regular file is
ignored and rewritten. Something a stat cannot see (a daemon stopped since) shows as a
failure of the command itself, which is then explained by asking again (fdl.tasks).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.engine._paths import candidate_paths, which_on
from fdl.errors import FdlError

TYPE_CHECKING = False  # the types' dataclasses cost start-up: recall_compose needs none
if TYPE_CHECKING:
    from fdl.engine._types import ClientSelection, ComposeCommand, DockerClient

__all__ = ["forget", "recall", "recall_compose", "remember"]

FORMAT = 1
_LIMIT = 64 << 10  # a record is about 1 kB
_KEEP = 32  # records kept (one per PATH, client and context a user switches between)
_VARIABLES = (
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
    "DOCKER_API_VERSION",
    "FDL_DOCKER",
    "PATH",
)
_PLUGIN_DIRS = (
    "/usr/local/lib/docker/cli-plugins",
    "/usr/local/libexec/docker/cli-plugins",
    "/usr/lib/docker/cli-plugins",
    "/usr/libexec/docker/cli-plugins",
)


def _stat(path: str) -> list[int | str] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [
        os.path.realpath(path),
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    ]


def _key(environ: Mapping[str, str]) -> str | None:
    """Everything the probes' answers depend on that can be seen without asking docker."""
    try:
        paths, source = candidate_paths(environ)
    except FdlError:
        return None
    if not paths:
        return None
    config = environ.get("DOCKER_CONFIG") or os.path.join(environ.get("HOME", ""), ".docker")
    compose = which_on("docker-compose", environ)
    parts = {
        "format": FORMAT,
        "clients": [[path, _stat(path)] for path in paths],
        "source": source,
        "compose": [compose, _stat(compose)] if compose else None,
        "config": _stat(os.path.join(config, "config.json")),
        "plugins": [[d, _stat(d)] for d in (os.path.join(config, "cli-plugins"), *_PLUGIN_DIRS)],
        "environ": {name: environ.get(name) for name in _VARIABLES},
    }
    return json.dumps(parts, sort_keys=True)


def _file(key: str, environ: Mapping[str, str]) -> Path:
    from fdl.paths import cache_dir

    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return cache_dir(environ) / "engine-probes" / f"{digest}.json"


def _client(data: Any) -> DockerClient:
    from fdl.engine._types import Builder, DockerClient

    if not isinstance(data, dict):
        raise ValueError("a client is an object")
    path, version, builder = data["path"], data["version"], Builder(data["builder"])
    optional = [data.get(name) for name in ("buildx", "server_version", "problem")]
    if not isinstance(path, str) or not isinstance(version, str):
        raise ValueError("a client's path and version are text")
    if not all(value is None or isinstance(value, str) for value in optional):
        raise ValueError("a client's buildx, server_version and problem are text or null")
    return DockerClient(path, version, builder, *optional)


def _texts(data: Any) -> tuple[str, ...]:
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise ValueError("expected a list of text")
    return tuple(data)


def _compose_parts(data: Any) -> tuple[tuple[str, ...], str, str, dict[str, str], tuple[str, ...]]:
    """(argv, version, flavour, env, notes) of a kept compose choice, checked."""
    env = data["env"]
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("compose's env maps text to text")
    version, flavour = data["version"], data["flavour"]
    if not isinstance(version, str) or flavour not in ("plugin", "standalone"):
        raise ValueError("compose's version is text, its flavour plugin or standalone")
    argv = _texts(data["argv"])
    if not argv:
        raise ValueError("compose's argv is empty")
    shim = env.get("PATH", "").split(os.pathsep)[0]
    if shim and not os.path.lexists(os.path.join(shim, "docker")):
        raise ValueError("compose v1's docker link is gone")
    return argv, version, flavour, env, _texts(data["notes"])


def _compose(data: Any) -> ComposeCommand | None:
    if data is None:
        return None
    from fdl.engine._types import ComposeCommand

    return ComposeCommand(*_compose_parts(data))


def _read(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The record kept for this engine, when it is one (its key this engine's)."""
    key = _key(environ)
    if key is None:
        return None
    path = _file(key, environ)
    from fdl._files import read_small_text

    try:
        if path.is_symlink():
            return None
        text = read_small_text(path, _LIMIT)
        if text is None:
            return None
        data = json.loads(text)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    return data


def recall_compose(environ: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, str]] | None:
    """The kept compose program (its argv and variables) alone: what a ``docker:`` project
    command needs, without the engine's modules (start-up time)."""
    data = _read(environ)
    try:
        if data is None or data["compose"] is None:
            return None
        client = data["client"]
        if not (
            isinstance(client, dict)
            and isinstance(client.get("path"), str)
            and isinstance(client.get("server_version"), str)  # a daemon answered
            and data["source"] in ("PATH", "FDL_DOCKER")
        ):
            return None
        argv, _, _, env, _ = _compose_parts(data["compose"])
    except (ValueError, KeyError, TypeError):
        return None
    return argv, env


def _selection(data: dict[str, Any]) -> ClientSelection | None:
    from fdl.engine._types import ClientSelection

    chosen = _client(data["client"])
    tried = tuple(_client(item) for item in data["tried"])
    source = data["source"]
    if not chosen.usable or source not in ("PATH", "FDL_DOCKER"):
        return None
    return ClientSelection(chosen, tried, source)


def recall(
    environ: Mapping[str, str],
) -> tuple[ClientSelection, ComposeCommand | None] | None:
    """The answers kept for this engine, or None (never asked, changed, or unreadable)."""
    data = _read(environ)
    if data is None:
        return None
    try:
        selection = _selection(data)
        return None if selection is None else (selection, _compose(data.get("compose")))
    except (ValueError, KeyError, TypeError):
        return None


def _client_data(client: DockerClient) -> dict[str, Any]:
    return {
        "path": client.path,
        "version": client.version,
        "builder": client.builder.value,
        "buildx": client.buildx,
        "server_version": client.server_version,
        "problem": client.problem,
    }


def remember(
    environ: Mapping[str, str], selection: ClientSelection, compose: ComposeCommand | None
) -> None:
    """Keep answers that worked (a daemon answered); a cache that cannot be written is
    not an error (the next run asks again)."""
    key = _key(environ)
    if key is None or not selection.client.usable:
        return
    data = {
        "key": key,
        "client": _client_data(selection.client),
        "tried": [_client_data(c) for c in selection.tried],
        "source": selection.source,
        "compose": None
        if compose is None
        else {
            "argv": list(compose.argv),
            "version": compose.version,
            "flavour": compose.flavour,
            "env": dict(compose.env),
            "notes": list(compose.notes),
        },
    }
    from fdl._files import atomic_write_text
    from fdl.paths import own_cache_dir

    path = _file(key, environ)
    with contextlib.suppress(OSError):
        own_cache_dir(path.parent)  # `fdl cache clean engine` may remove it
        atomic_write_text(path, json.dumps(data, sort_keys=True) + "\n")
        _prune(path.parent)


def forget(environ: Mapping[str, str]) -> None:
    """Drop the answers kept for this engine (they were found stale)."""
    key = _key(environ)
    if key is not None:
        with contextlib.suppress(OSError):
            _file(key, environ).unlink(missing_ok=True)


def _prune(folder: Path) -> None:
    """Keep the newest records only (tests and PATH changes make new keys)."""
    records = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
            records.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
    for _, path in sorted(records, reverse=True)[_KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(path)
