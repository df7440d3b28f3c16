"""Registry credentials as docker keeps them: ``auths`` in the docker config
(``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``), or a credential helper
(``credHelpers`` for one registry, ``credsStore`` for all) asked through the runner."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.runner import Runner

__all__ = ["docker_config_path", "registry_credentials"]


def docker_config_path(environ: Mapping[str, str]) -> Path:
    """Where docker reads its config."""
    if environ.get("DOCKER_CONFIG"):
        return Path(environ["DOCKER_CONFIG"]) / "config.json"
    return Path(environ.get("HOME") or Path.home()) / ".docker" / "config.json"


def _auth_entry(auths: Mapping[str, Any], host: str) -> Mapping[str, Any] | None:
    for key in (host, f"https://{host}", f"http://{host}", f"https://{host}/v1/"):
        if key in auths:
            return dict(auths[key])
    return None


def registry_credentials(
    host: str, environ: Mapping[str, str], runner: Runner
) -> tuple[str, str] | None:
    """(user, secret) for ``host``, or None when docker has none (anonymous).

    Raises:
        EnvironmentProblem: the config is unreadable, or its credential helper failed.
    """
    path = docker_config_path(environ)
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem(
            f"cannot read the docker config {path}: {exc}",
            hint="fix or remove the file, then `docker login` again",
        ) from None
    helper = (config.get("credHelpers") or {}).get(host) or config.get("credsStore")
    if helper:
        try:
            done = runner.run([f"docker-credential-{helper}", "get"], input=host)
        except CommandFailed as exc:
            if "credentials not found" in (exc.details or "").lower():
                return None
            raise EnvironmentProblem(
                f"the docker credential helper {helper!r} failed for {host}",
                hint=f"docker login {host}, or check docker-credential-{helper}",
                details=exc.details,
            ) from None
        answer = json.loads(done.stdout)
        return str(answer["Username"]), str(answer["Secret"])
    entry = _auth_entry(config.get("auths") or {}, host)
    if not entry:
        return None
    if entry.get("identitytoken"):
        return "<token>", str(entry["identitytoken"])
    if entry.get("auth"):
        user, _, secret = base64.b64decode(entry["auth"]).decode().partition(":")
        return user, secret
    if entry.get("username"):
        return str(entry["username"]), str(entry.get("password") or "")
    return None
