"""Registry credentials as docker keeps them: ``auths`` in the docker config
(``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``), or a credential helper
(``credHelpers`` for one registry, ``credsStore`` for all) asked through the runner."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fdl._files import read_small_text, reason_of
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
            entry = auths[key]
            return entry if isinstance(entry, dict) else {}
    return None


def _mapping(value: object, path: Path, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad_config(path, f"{where} is not a JSON object")
    return value


def _bad_config(path: Path, what: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"the docker config {path}: {what}",
        hint="fix or remove the file, then `docker login` again",
    )


def registry_credentials(
    host: str, environ: Mapping[str, str], runner: Runner
) -> tuple[str, str] | None:
    """(user, secret) for ``host``, or None when docker has none (anonymous).

    Raises:
        EnvironmentProblem: the config is unreadable or not docker's, or its credential
            helper failed or answered with something else than credentials.
    """
    path = docker_config_path(environ)
    if not path.is_file():
        return None
    try:
        config = json.loads(read_small_text(path) or "{}")
    except (OSError, ValueError, RecursionError) as exc:
        raise _bad_config(path, f"cannot be read: {reason_of(exc)}") from None
    config = _mapping(config, path, "the file")
    helper = _mapping(config.get("credHelpers"), path, "credHelpers").get(host) or config.get(
        "credsStore"
    )
    if helper:
        if not isinstance(helper, str):
            raise _bad_config(path, f"the credential helper for {host} is not a name")
        return _from_helper(helper, host, runner)
    entry = _auth_entry(_mapping(config.get("auths"), path, "auths"), host)
    if not entry:
        return None
    if entry.get("identitytoken"):
        return "<token>", str(entry["identitytoken"])
    if entry.get("auth"):
        try:
            text = base64.b64decode(str(entry["auth"]), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise _bad_config(path, f"the auth of {host} is not base64 of user:password") from None
        user, _, secret = text.partition(":")
        return user, secret
    if entry.get("username"):
        return str(entry["username"]), str(entry.get("password") or "")
    return None


def _from_helper(helper: str, host: str, runner: Runner) -> tuple[str, str] | None:
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
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if not (
        isinstance(answer, dict)
        and isinstance(answer.get("Username"), str)
        and isinstance(answer.get("Secret"), str)
    ):
        raise EnvironmentProblem(
            f"the docker credential helper {helper!r} answered for {host} without a "
            "Username and a Secret",
            hint=f"docker login {host}, or check docker-credential-{helper} get",
        )
    return answer["Username"], answer["Secret"]
