"""The compiler cache of a build: ccache or sccache as C, C++ and CUDA compiler launcher.

sccache can keep its cache in Redis, S3, GCS, Azure, ... (``SCCACHE_REDIS_ENDPOINT``,
``SCCACHE_BUCKET``, ``SCCACHE_GCS_BUCKET``: settings given in ``libtorch.build.cache_settings``
or already in the environment are passed through), so a team or CI shares one cache.
Distributed compilation (sccache-dist) is ``libtorch.build.cache: {kind: sccache, dist:
{scheduler: URL, auth: ...}}``: fdl writes the client config (:mod:`._dist`), checks the
scheduler before the build and counts distributed and local compiles after it.

An unreachable cache never fails a build: when the sccache server cannot start with its
backend, the build runs without a launcher and says so.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fdl.errors import FdlError
from fdl.libtorch.build._dist import (
    DistPlan,
    check_token,
    client_config,
    dist_status,
    read_token,
    write_private,
)
from fdl.runner import Runner

__all__ = [
    "CachePlan",
    "CacheStats",
    "cache_stats",
    "mask",
    "plan_cache",
    "start_cache",
    "stop_cache",
]

TokenProbe = Callable[[str, str], str | None]
LAUNCHERS = ("CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER")
CUDA_LAUNCHER = "CMAKE_CUDA_COMPILER_LAUNCHER"
_SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")
_URL_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*(@)")
_REMOTE_KEYS = {
    "SCCACHE_REDIS_ENDPOINT": "redis",
    "SCCACHE_REDIS": "redis",
    "SCCACHE_REDIS_CLUSTER_ENDPOINTS": "redis cluster",
    "SCCACHE_BUCKET": "s3",
    "SCCACHE_GCS_BUCKET": "gcs",
    "SCCACHE_AZURE_CONNECTION_STRING": "azure",
    "SCCACHE_GHA_ENABLED": "github actions",
    "SCCACHE_WEBDAV_ENDPOINT": "webdav",
    "SCCACHE_MEMCACHED_ENDPOINT": "memcached",
    "CCACHE_REMOTE_STORAGE": "ccache remote storage",
}


@dataclass(frozen=True)
class CachePlan:
    """How the build uses a compiler cache.

    Attributes:
        kind: ``ccache``, ``sccache`` or ``none``.
        program: The launcher (a path natively, a name inside the builder image).
        env: Variables for the build (launchers, cache directory, backend settings).
        remote: The shared backend (``redis redis://...``), None for a local cache.
        directory: The local cache directory, when the cache is local.
        dist: The sccache-dist farm the compiles go to, None for none.
    """

    kind: str
    program: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    remote: str | None = None
    directory: str | None = None
    dist: DistPlan | None = None

    @property
    def enabled(self) -> bool:
        return self.kind != "none" and self.program is not None

    def without_launcher(self) -> CachePlan:
        """The same build with no compiler cache (the fallback when it is unreachable)."""
        return CachePlan("none", None, {"USE_CCACHE": "0"})

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "program": self.program,
            "remote": mask_value("remote", self.remote or "") or None,
            "directory": self.directory,
            "dist": self.dist.to_json() if self.dist is not None else None,
        }


def is_secret(key: str) -> bool:
    return any(word in key.upper() for word in _SECRET_WORDS)


def mask_value(key: str, value: str) -> str:
    """``***`` for secrets; URLs keep everything but their password."""
    if is_secret(key):
        return "***"
    return _URL_PASSWORD.sub(r"\1***\2", value)


def mask(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for display: secret values hidden."""
    return {key: mask_value(key, value) for key, value in env.items()}


def plan_cache(
    kind: str,
    *,
    program: str | None,
    directory: str,
    settings: Mapping[str, str],
    environ: Mapping[str, str],
    cuda: bool,
    dist: DistPlan | None = None,
) -> CachePlan:
    """The cache part of a build plan (pure).

    Args:
        kind: ``ccache``, ``sccache`` or ``none``.
        program: The launcher to use (None: not installed, the cache is skipped).
        directory: Local cache directory (``CCACHE_DIR`` / ``SCCACHE_DIR``).
        settings: Settings from the manifest or recipe (win over the environment).
        environ: The environment: ``SCCACHE_*`` / ``CCACHE_*`` already set pass through.
        cuda: Also launch nvcc through the cache.
        dist: The sccache-dist farm (sccache only): ``SCCACHE_CONF`` names fdl's client
            config, which replaces ``~/.config/sccache/config`` for this build.
    """
    if kind == "none" or program is None:
        return CachePlan("none", None, {"USE_CCACHE": "0"})
    prefix = "SCCACHE_" if kind == "sccache" else "CCACHE_"
    passed = {k: v for k, v in environ.items() if k.startswith(prefix)}
    passed.update({k: v for k, v in settings.items() if k.startswith(prefix)})
    env: dict[str, str] = {name: program for name in LAUNCHERS}
    if cuda:
        env[CUDA_LAUNCHER] = program
    # PyTorch's own USE_CCACHE would wrap the compilers in ccache a second time.
    env["USE_CCACHE"] = "0"
    remote_key = next((k for k in sorted(passed) if k in _REMOTE_KEYS), None)
    remote = f"{_REMOTE_KEYS[remote_key]} {passed[remote_key]}" if remote_key else None
    local = None
    if remote is None:
        local = passed.get(f"{prefix}DIR", directory)
        env[f"{prefix}DIR"] = local
    env.update(passed)
    if dist is not None and kind == "sccache":
        env["SCCACHE_CONF"] = dist.config_file
    else:
        dist = None
    return CachePlan(kind, program, env, remote, local, dist)


@dataclass(frozen=True)
class CacheStats:
    """Hits and misses of one build (None when the cache could not tell).

    Attributes:
        distributed: Compiles a sccache-dist build server ran (None: no farm).
        local: Compiles that ran on this machine (with a farm: fallbacks and what sccache
            does not distribute, e.g. nvcc's own steps).
        dist_errors: Distributed compiles that failed and were retried locally.
        compiled_by: Compiles (cache misses) per compiler kind, most first, with a farm:
            sccache splits an ``nvcc`` call into ``cudafe++``, ``cicc`` and ``ptxas`` steps
            and the host compiler's compile of the generated code (counted as ``nvcc``);
            the ``nvcc`` call itself, which preprocesses and runs ``fatbinary`` on this
            machine, is one more compile that is always local (measured on sccache 0.16).
    """

    hits: int | None
    misses: int | None
    detail: str = ""
    distributed: int | None = None
    local: int | None = None
    dist_errors: int | None = None
    compiled_by: tuple[tuple[str, int], ...] = ()

    def summary(self) -> str:
        if self.hits is None:
            return f"cache statistics unavailable{': ' + self.detail if self.detail else ''}"
        total = (self.hits or 0) + (self.misses or 0)
        rate = f" ({100 * self.hits / total:.0f}% hits)" if total else ""
        text = f"{self.hits} hits, {self.misses} misses{rate}"
        if self.distributed is not None:
            text += f"; {self.distributed} compiles distributed, {self.local} local"
            if self.dist_errors:
                text += f" ({self.dist_errors} failed on the farm and ran locally)"
            if self.compiled_by:
                text += "; compiled: " + ", ".join(f"{n} {k}" for k, n in self.compiled_by)
        return text

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"hits": self.hits, "misses": self.misses, "detail": self.detail}
        if self.distributed is not None:
            data["distributed"] = self.distributed
            data["local"] = self.local
            data["dist_errors"] = self.dist_errors
            data["compiled_by"] = dict(self.compiled_by)
        return data


def start_cache(
    plan: CachePlan,
    runner: Runner,
    env: Mapping[str, str],
    probe: TokenProbe | None = None,
) -> tuple[CachePlan, str | None]:
    """Get the cache ready (sccache: a server with this build's backend; stats zeroed).

    With a sccache-dist farm: the client config is written, and a scheduler that is down,
    has no build server or refuses the token gives a warning and local compiles.

    Args:
        probe: Checks the token with the scheduler: (url, token) -> None or why it was
            refused (default: :func:`fdl.libtorch.build._dist.check_token`).

    Raises:
        UsageError: the farm's token variable is unset or its file unreadable.

    Returns:
        (the plan to build with, a warning): when the backend cannot be reached the plan is
        one without a launcher and the warning says why.
    """
    if not plan.enabled:
        return plan, None
    assert plan.program is not None
    probe = probe or check_token
    full = {**env, **plan.env}
    token = None
    if plan.dist is not None:
        token = read_token(plan.dist.settings, env)  # a missing token is the user's to fix
        write_private(Path(plan.dist.config_file), client_config(plan.dist, token))
    try:
        if plan.kind == "sccache":
            # A running server keeps the backend it started with: restart it with ours.
            runner.run([plan.program, "--stop-server"], env=full, check=False, timeout=60)
            started = runner.run(
                [plan.program, "--start-server"], env=full, check=False, timeout=120
            )
            if not started.ok:
                why = (started.stderr or started.stdout).strip().splitlines()[-1:] or ["no reason"]
                where = plan.remote or plan.directory or "its cache"
                return plan.without_launcher(), (
                    f"sccache cannot use {mask_value('remote', where)} ({why[0]}); "
                    "building without a compiler cache"
                )
            runner.run([plan.program, "--zero-stats"], env=full, check=False, timeout=60)
            if plan.dist is not None and token is not None:
                return _check_farm(plan, runner, full, token, probe)
        else:
            runner.run([plan.program, "--zero-stats"], env=full, check=False, timeout=60)
    except FdlError as exc:
        return plan.without_launcher(), f"{plan.kind} is unusable ({exc.message}); no cache"
    return plan, None


def _check_farm(
    plan: CachePlan, runner: Runner, env: Mapping[str, str], token: str, probe: TokenProbe
) -> tuple[CachePlan, str | None]:
    """Ask the started sccache server whether it reaches the scheduler, and the scheduler
    whether it takes the token; if not, restart the server with a local-only config."""
    assert plan.dist is not None and plan.program is not None
    scheduler = plan.dist.settings.scheduler
    done = runner.run([plan.program, "--dist-status"], env=env, check=False, timeout=60)
    servers, detail = dist_status(done.stdout)
    problem = None
    if servers is None:
        problem = f"the sccache-dist scheduler {scheduler} is not reachable ({detail})"
    elif servers == 0:
        problem = f"the sccache-dist scheduler {scheduler} has no build server"
    else:
        refused = probe(scheduler, token)
        if refused is not None:
            problem = f"sccache-dist scheduler {scheduler}: {refused}"
    if problem is None:
        return plan, None
    write_private(Path(plan.dist.config_file), client_config(plan.dist, None))
    runner.run([plan.program, "--stop-server"], env=env, check=False, timeout=60)
    runner.run([plan.program, "--start-server"], env=env, check=False, timeout=120)
    runner.run([plan.program, "--zero-stats"], env=env, check=False, timeout=60)
    return replace(plan, dist=None), f"{problem}; compiling locally"


def cache_stats(plan: CachePlan, runner: Runner, env: Mapping[str, str]) -> CacheStats:
    """Hits and misses since :func:`start_cache` (never raises)."""
    if not plan.enabled or plan.program is None:
        return CacheStats(None, None, "no compiler cache")
    full = {**env, **plan.env}
    try:
        if plan.kind == "sccache":
            done = runner.run(
                [plan.program, "--show-stats", "--stats-format", "json"],
                env=full,
                check=False,
                timeout=60,
            )
            return _sccache_stats(done.stdout, dist=plan.dist is not None)
        done = runner.run([plan.program, "--print-stats"], env=full, check=False, timeout=60)
        return _ccache_stats(done.stdout)
    except FdlError as exc:
        return CacheStats(None, None, exc.message)


def stop_cache(plan: CachePlan, runner: Runner, env: Mapping[str, str]) -> None:
    """Stop the sccache server this build started (ccache has none)."""
    if plan.kind == "sccache" and plan.program is not None:
        with contextlib.suppress(FdlError):
            runner.run(
                [plan.program, "--stop-server"], env={**env, **plan.env}, check=False, timeout=60
            )


def _sccache_stats(text: str, *, dist: bool = False) -> CacheStats:
    """``sccache --show-stats --stats-format json``; ``dist``: also count the farm's work
    (``dist_compiles`` per build server, ``dist_errors``; the text form prints them as
    "Successful distributed compiles" and "Failed distributed compilations")."""
    try:
        stats = json.loads(text)["stats"]
    except (ValueError, KeyError, TypeError):
        return CacheStats(None, None, "sccache printed no statistics")
    hits = sum(int(v) for v in (stats.get("cache_hits") or {}).get("counts", {}).values())
    misses = sum(int(v) for v in (stats.get("cache_misses") or {}).get("counts", {}).values())
    errors = sum(int(v) for v in (stats.get("cache_errors") or {}).get("counts", {}).values())
    detail = f"{stats.get('compile_requests', 0)} compile requests"
    if errors:
        detail += f", {errors} cache errors"
    if not dist:
        return CacheStats(hits, misses, detail)
    distributed = sum(int(v) for v in (stats.get("dist_compiles") or {}).values())
    compiled = int(stats.get("compilations", 0))
    kinds = _by_compiler((stats.get("cache_misses") or {}).get("adv_counts") or {})
    return CacheStats(
        hits,
        misses,
        detail,
        distributed=distributed,
        local=max(compiled - distributed, 0),
        dist_errors=int(stats.get("dist_errors", 0)),
        compiled_by=kinds,
    )


def _by_compiler(counts: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """sccache's ``adv_counts`` (``"ptx [cicc]": 2``, ``"c++ [gcc]": 5``) per compiler,
    most first (ties by name)."""
    totals: dict[str, int] = {}
    for key, value in counts.items():
        match = re.fullmatch(r".*\[(?P<compiler>[^\]]+)\]\s*", str(key))
        compiler = match.group("compiler") if match else str(key)
        totals[compiler] = totals.get(compiler, 0) + int(value)
    return tuple(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def _ccache_stats(text: str) -> CacheStats:
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            values[key.strip()] = int(value)
    if not values:
        return CacheStats(None, None, "ccache printed no statistics")
    hits = values.get("direct_cache_hit", 0) + values.get("preprocessed_cache_hit", 0)
    return CacheStats(hits, values.get("cache_miss", 0), "ccache --print-stats")


def with_plan(plan: CachePlan, **changes: Any) -> CachePlan:
    """A copy of ``plan`` with fields changed (for tests and the docker backend)."""
    return replace(plan, **changes)
