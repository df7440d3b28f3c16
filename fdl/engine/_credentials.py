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
from fdl._text import hide_credentials, printable
from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.runner import Runner

__all__ = ["HELPER_TIMEOUT_ENV", "docker_config_path", "registry_credentials"]

HELPER_TIMEOUT_ENV = "FDL_CREDENTIAL_HELPER_TIMEOUT"
_HELPER_TIMEOUT = 15.0  # a helper that has not answered by then is waiting for a person
# A helper's answer is a small JSON object; more is not credentials.
_HELPER_OUTPUT = 64 << 10


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
        return _from_helper(helper, host, runner, _helper_timeout(environ))
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


def _helper_timeout(environ: Mapping[str, str]) -> float:
    text = environ.get(HELPER_TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else _HELPER_TIMEOUT
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise EnvironmentProblem(
            f"{HELPER_TIMEOUT_ENV}={text!r} is not a number of seconds",
            hint=f"set it to a positive number such as {HELPER_TIMEOUT_ENV}=120, or unset it",
        )
    return value


def _from_helper(helper: str, host: str, runner: Runner, timeout: float) -> tuple[str, str] | None:
    """Ask ``docker-credential-<helper> get``, within ``timeout`` seconds and 64 KiB of
    output; what it printed is relayed without anything shaped like a credential."""
    try:
        done = runner.run(
            [f"docker-credential-{helper}", "get"],
            input=host,
            timeout=timeout,
            max_output=_HELPER_OUTPUT,
        )
    except CommandFailed as exc:
        said = exc.details or ""
        if "credentials not found" in said.lower():
            return None
        if exc.returncode == -1:  # did not finish in time, or printed too much
            raise EnvironmentProblem(
                f"the docker credential helper {helper!r} for {host}: {exc.message}",
                hint=f"check docker-credential-{helper} (is it waiting for a password or a "
                f"keyring?); to wait longer, set {HELPER_TIMEOUT_ENV}=SECONDS (now {timeout:g})",
            ) from None
        raise EnvironmentProblem(
            f"the docker credential helper {helper!r} failed for {host}",
            hint=f"docker login {host}, or check docker-credential-{helper}",
            details="\n".join(printable(line) for line in hide_credentials(said).splitlines()[-10:])
            or None,
        ) from None
    try:
        answer = json.loads(done.stdout)
    except (ValueError, RecursionError):
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
