"""Distributed compilation with sccache-dist: the client's config, the scheduler check.

The manifest names the scheduler and where the client token is (an environment variable or
a file); fdl writes the sccache client config with the token into a private file (mode
0600) in the build's state directory and points ``SCCACHE_CONF`` at it, so the token is
never in the plan, the log or ``--json``. Before the build, the local sccache server is
started with that config and asked ``--dist-status``; a scheduler that does not answer, has
no build server, or refuses the token gives a warning and a local build (a refused token
would otherwise fail every compile: sccache does not fall back on HTTP 401).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl._files import read_text_file, reason_of
from fdl.errors import UsageError

__all__ = [
    "DistPlan",
    "DistSettings",
    "check_token",
    "client_config",
    "dist_status",
    "read_token",
    "write_private",
]

TOOLCHAIN_CACHE_BYTES = 5 * 1024**3
"""The client's cache of packaged toolchains (sccache's default is 10 GB)."""


@dataclass(frozen=True)
class DistSettings:
    """``libtorch.build.cache.dist`` as asked: the scheduler and the token's source.

    Attributes:
        scheduler: The scheduler's URL.
        token_env: The variable holding the client token, or None.
        token_file: The file holding it, or None (exactly one of the two is set).
        origin: Where it was written (``fdl.yml:12:5 (libtorch.build.cache.dist)``).
    """

    scheduler: str
    token_env: str | None = None
    token_file: Path | None = None
    origin: str = ""

    def token_source(self) -> str:
        return f"${self.token_env}" if self.token_env else f"file {self.token_file}"

    def __str__(self) -> str:
        return f"{self.scheduler} (token from {self.token_source()})"


@dataclass(frozen=True)
class DistPlan:
    """How a build uses the farm: the settings plus the files fdl writes for it.

    Attributes:
        settings: The scheduler and the token's source.
        config_file: The private sccache client config (``SCCACHE_CONF``).
        toolchain_dir: Where the client keeps the toolchain archives it sends to servers.
    """

    settings: DistSettings
    config_file: str
    toolchain_dir: str

    def to_json(self) -> dict[str, Any]:
        return {
            "scheduler": self.settings.scheduler,
            "token_from": self.settings.token_source(),
            "config_file": self.config_file,
            "toolchain_dir": self.toolchain_dir,
        }


def read_token(settings: DistSettings, environ: Mapping[str, str]) -> str:
    """The client token from its variable or file.

    Raises:
        UsageError: the variable is unset or empty, or the file is unreadable or empty.
    """
    where = f"{settings.origin}: " if settings.origin else ""
    if settings.token_env:
        token = environ.get(settings.token_env, "").strip()
        if not token:
            raise UsageError(
                f"{where}the sccache-dist token variable {settings.token_env} is not set",
                hint=f"export {settings.token_env}=<the scheduler's client_auth token>, or "
                "use auth: {token_file: PATH}",
            )
        return token
    assert settings.token_file is not None
    try:
        # a FIFO, a device or a huge file is refused, not read (a FIFO would block)
        lines = read_text_file(settings.token_file, limit=1 << 16).splitlines()
    except OSError as exc:
        raise UsageError(
            f"{where}cannot read the sccache-dist token file {settings.token_file} "
            f"({reason_of(exc)})",
            hint="create it with the scheduler's client_auth token on its first line "
            "(chmod 600), or use auth: {token_env: VAR}",
        ) from None
    token = lines[0].strip() if lines else ""
    if not token:
        raise UsageError(
            f"{where}the sccache-dist token file {settings.token_file} is empty",
            hint="put the scheduler's client_auth token on its first line",
        )
    return token


def _toml(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def client_config(plan: DistPlan, token: str | None) -> str:
    """The sccache client config; ``token`` None writes one without ``[dist]`` (local)."""
    lines = ["# Written by fdl for one libtorch build; holds a secret (mode 0600)."]
    if token is None:
        lines.append("# sccache-dist is off for this build: compiles are local.")
        return "\n".join(lines) + "\n"
    lines += [
        "[dist]",
        f"scheduler_url = {_toml(plan.settings.scheduler)}",
        "# Linux clients package gcc/clang, and nvcc's cudafe++/cicc/ptxas, themselves.",
        "toolchains = []",
        f"toolchain_cache_size = {TOOLCHAIN_CACHE_BYTES}",
        f"cache_dir = {_toml(plan.toolchain_dir)}",
        "",
        "[dist.auth]",
        'type = "token"',
        f"token = {_toml(token)}",
    ]
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (created 0600, never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file of another mode keeps its mode on O_TRUNC
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def dist_status(text: str) -> tuple[int | None, str]:
    """Read ``sccache --dist-status``: (build servers, why not usable or a description).

    The first item is None when the client is not connected to a scheduler.
    """
    try:
        status = json.loads(text)
    except ValueError:
        return None, f"sccache --dist-status printed {text.strip()[:80]!r}"
    if isinstance(status, dict) and "SchedulerStatus" in status:
        _, info = status["SchedulerStatus"]
        servers, cpus = int(info.get("num_servers", 0)), int(info.get("num_cpus", 0))
        return servers, f"{servers} build server(s), {cpus} CPUs"
    if isinstance(status, dict) and "NotConnected" in status:
        detail = status["NotConnected"]
        return None, str(detail[1] if isinstance(detail, list) and len(detail) > 1 else detail)
    if isinstance(status, dict) and "Disabled" in status:
        return None, "distributed compilation is disabled in this sccache"
    return None, f"unexpected --dist-status answer {text.strip()[:80]!r}"


def check_token(scheduler: str, token: str, *, timeout: float = 10.0) -> str | None:
    """Whether the scheduler accepts ``token``: None when it does, else why not.

    Asks for a job with a body the scheduler refuses *after* the token check (not the
    binary body a real request carries), so no job is allocated: HTTP 401 means the token
    is wrong, 400 that it passed. Measured on sccache-dist 0.16 (tiny-http); a scheduler
    that decodes the body before the token check answers 400 either way, and a refused
    token then shows as failed compiles.
    """
    import urllib.error
    import urllib.request

    url = scheduler.rstrip("/") + "/api/v1/scheduler/alloc_job"
    request = urllib.request.Request(
        url,
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return "the scheduler refused the token (HTTP 401)"
        return None
    except (OSError, ValueError):
        # sccache itself reached the scheduler (--dist-status): trust it, not this probe
        # (a proxy or CA setting of Python's may differ from sccache's).
        return None
