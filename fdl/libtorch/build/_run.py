"""Executing a build plan: the backend, then verification, metadata and activation."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.compat import ArchList
from fdl.libtorch.build._buildplan import BuildPlan
from fdl.libtorch.build._cache import CacheStats, _ccache_stats, _sccache_stats
from fdl.runner import Runner, default_runner

__all__ = ["BuildResult", "run_build"]

Note = Callable[[str], None]


@dataclass(frozen=True)
class BuildResult:
    """A finished, verified and installed build.

    Attributes:
        plan: What was run.
        path: The variant directory.
        info: Its metadata (:class:`fdl.libtorch.variants.VariantInfo`).
        activated: Whether it is now the active variant.
        found: The GPU targets read from its libraries.
        libraries: Per library with device code, a summary (``cubins sm_75; PTX compute_120``).
        duration_s: Wall time of the build.
        cache: Compiler cache hits and misses.
        cache_warning: Why the cache was not used, if it was not.
    """

    plan: BuildPlan
    path: Path
    info: Any
    activated: bool
    found: ArchList
    libraries: Mapping[str, str]
    duration_s: float
    cache: CacheStats
    cache_warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.plan.variant,
            "path": str(self.path),
            "activated": self.activated,
            "archs_requested": self.plan.archs.codes(),
            "archs_found": self.found.codes(),
            "libraries": dict(self.libraries),
            "duration_s": round(self.duration_s, 1),
            "cache": self.cache.to_json(),
            "cache_warning": self.cache_warning,
            "log": str(self.plan.log_file),
            "info": self.info.to_json(),
        }


def _docker_stats(lines: list[str]) -> CacheStats:
    if not lines:
        return CacheStats(None, None, "no compiler cache")
    kind = lines[0].split()[-1]
    body = "\n".join(line for line in lines[1:] if "fdl-cache-stats" not in line)
    return _sccache_stats(body) if kind == "sccache" else _ccache_stats(body)


def fetch_sources(
    plan: BuildPlan,
    *,
    runner: Runner | None = None,
    environ: Mapping[str, str] | None = None,
    on_line: Note | None = None,
) -> Path:
    """The fetch phase of ``plan`` alone (``--fetch-only``): natively the source tree, its
    optional dependencies and the build's venv; in Docker the image's fetch stage, whose
    cache mounts keep the source. Returns the source directory (native) or the tag of the
    fetch image (Docker) as a path-like name.

    Raises:
        CommandFailed: a download failed.
    """
    line = on_line or (lambda _: None)
    if plan.backend == "docker":
        from fdl.libtorch.build._docker import build_in_docker

        assert plan.docker is not None
        build_in_docker(plan, plan.output_dir, on_line=line, fetch_only=True)
        return Path(f"{plan.docker.tag}-fetch")
    from fdl.libtorch.build._native import fetch_natively

    run = runner or default_runner()
    fetch_natively(plan, run, dict(os.environ if environ is None else environ), on_line=line)
    return plan.source_dir


def run_build(
    plan: BuildPlan,
    *,
    runner: Runner | None = None,
    environ: Mapping[str, str] | None = None,
    on_line: Note | None = None,
    on_note: Note | None = None,
) -> BuildResult:
    """Run ``plan``, verify the libraries, install and (unless told not to) activate.

    Args:
        on_line: Every output line of the build (the full log is in ``plan.log_file``).
        on_note: Short messages for the user (cache fallback, resumed build, ...).

    Raises:
        CommandFailed: the build failed (re-running resumes it).
        VerificationFailed: the libraries lack a requested arch.
        EnvironmentProblem: docker/BuildKit or the venv are not usable.
    """
    from fdl.libtorch.build._finish import build_info, install_variant, read_facts, verify

    run = runner or default_runner()
    env = dict(os.environ if environ is None else environ)
    line = on_line or (lambda _: None)
    note = on_note or (lambda _: None)
    staging = plan.output_dir.with_name(f".staging-{plan.output_dir.name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    _tag_caches(plan)
    started = time.monotonic()
    warning = None
    try:
        if plan.backend == "docker":
            from fdl.libtorch.build._docker import build_in_docker

            stats = _docker_stats(build_in_docker(plan, staging, on_line=line))
            facts = read_facts(staging)
        else:
            from fdl.libtorch.build._native import build_natively, collect_installed

            native = build_natively(plan, run, env, on_line=line, on_note=note)
            stats, warning, facts = native.stats, native.cache_warning, native.facts
            collect_installed(plan.source_dir, plan.work_dir / "build", staging)
        duration = time.monotonic() - started
        found, libraries = verify(plan, staging)
        info = build_info(plan, found, facts, duration, stats.to_json())
        activated = install_variant(plan, staging, info)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildResult(
        plan, plan.output_dir, info, activated, found, libraries, duration, stats, warning
    )


def _tag_caches(plan: BuildPlan) -> None:
    """Make the build's caches as fdl's (``fdl cache clean`` deletes only those): the
    ``.build-cache`` of the libtorch root and, natively, the compiler cache directory."""
    from fdl.paths import own_cache_dir

    if plan.cache_root is not None:
        own_cache_dir(plan.cache_root)
    if plan.backend != "docker" and plan.cache.directory:
        own_cache_dir(Path(plan.cache.directory).parent)
