"""The pieces of a build plan that both halves of planning use: the decision
(:mod:`._plan`) and the layout (:mod:`._layout`). Pure: data and small functions."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fdl.compat import ArchList, load_table, version_key
from fdl.compat.cuda import Toolkit
from fdl.libtorch.build._cache import CachePlan, plan_cache
from fdl.libtorch.build._dist import DistPlan
from fdl.libtorch.build._facts import MachineFacts
from fdl.libtorch.build._request import BuildRequest

__all__ = [
    "Toolchoice",
    "cache_for",
    "config_key",
    "configure_downloads",
    "environment_leaks",
    "source_build_table",
]

_LEAKING = ("BUILD_", "USE_", "CMAKE_")
_LEAKING_NAMES = (
    "TORCH_CUDA_ARCH_LIST",
    "TORCH_NVCC_FLAGS",
    "MAX_JOBS",
    "DEBUG",
    "REL_WITH_DEB_INFO",
)


def source_build_table() -> Mapping[str, object]:
    """The ``source_build`` part of ``fdl/data/compat/build.yaml``."""
    table: Mapping[str, object] = load_table("build")["source_build"]
    return table


def configure_downloads(torch: str) -> list[Mapping[str, str]]:
    """What CMake's configure of ``torch`` downloads by itself, per switch
    (``configure_downloads`` in build.yaml)."""
    entries = load_table("build").get("configure_downloads") or []
    return [
        {str(k): str(v) for k, v in entry.items()}
        for entry in entries
        if version_key(torch) >= version_key(str(entry.get("since_torch", "0")))
    ]


@dataclass(frozen=True)
class Toolchoice:
    """The backend and toolkit chosen, and how they were chosen."""

    backend: str
    kit: Toolkit | None
    description: str


def environment_leaks(environ: Mapping[str, str], env: Mapping[str, str]) -> tuple[str, ...]:
    """Build variables of the calling environment that the plan keeps out of the build."""
    return tuple(
        sorted(
            key
            for key in environ
            if (key.startswith(_LEAKING) or key in _LEAKING_NAMES) and key not in env
        )
    )


def config_key(*parts: str) -> str:
    """A short stable hash of a build configuration (names caches and images)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def cache_for(
    request: BuildRequest,
    facts: MachineFacts,
    backend: str,
    archs: ArchList,
    directory: str,
    state_dir: Path | None = None,
) -> CachePlan:
    """The compiler cache plan (see :func:`fdl.libtorch.build._cache.plan_cache`).

    Args:
        state_dir: The build's own directory (native): the sccache-dist client config goes
            there.
    """
    kind = str(request.value("cache", "ccache"))
    dist = None
    if request.cache_dist is not None and state_dir is not None:
        dist = DistPlan(
            request.cache_dist.value,
            config_file=str(state_dir / "sccache-dist.conf"),
            toolchain_dir=str(Path(directory).with_name("sccache-dist-client")),
        )
    settings = {k: s.value for k, s in request.cache_settings.items()}
    if backend == "docker":
        program = kind if kind != "none" else None
        environ: Mapping[str, str] = {}
    else:
        program = facts.tool_paths.get(kind) if kind != "none" else None
        environ = facts.environ
    return plan_cache(
        kind,
        program=program,
        directory=directory,
        settings=settings,
        environ=environ,
        cuda=bool(archs),
        dist=dist,
    )
