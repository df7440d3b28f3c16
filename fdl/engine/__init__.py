"""The container engine seam: every docker-using feature goes through here.

``default_engine()`` gives the process-wide :class:`DockerEngine`, which
drives the best docker CLI it finds (buildx plugin, else a client with
BuildKit built in, else the classic builder) through :mod:`fdl.runner`.
Tests of other modules use ``tests.support.fakes.FakeEngine``.

Example::

    from fdl.engine import BuildSpec, RunSpec, default_engine

    engine = default_engine()
    built = engine.build(BuildSpec(Path("."), tags=("me/app:1",)), on_line=print)
    result = engine.run(RunSpec("me/app:1", ("python3", "-V")))
"""

from __future__ import annotations

from fdl.engine._argv import build_command, buildkit_reasons, run_command
from fdl.engine._client import candidate_paths, probe_clients, select_client
from fdl.engine._compose import find_compose
from fdl.engine._credentials import registry_credentials
from fdl.engine._docker import DockerEngine
from fdl.engine._facts import translate_failure
from fdl.engine._types import (
    Builder,
    BuildResult,
    BuildSpec,
    BuildStep,
    ClientSelection,
    ComposeCommand,
    DiskUsage,
    DockerClient,
    Engine,
    ImageInfo,
    Layer,
    LineCallback,
    Mount,
    RunResult,
    RunSpec,
    Secret,
)

__all__ = [
    "BuildResult",
    "BuildSpec",
    "BuildStep",
    "Builder",
    "ClientSelection",
    "ComposeCommand",
    "DiskUsage",
    "DockerClient",
    "DockerEngine",
    "Engine",
    "ImageInfo",
    "Layer",
    "LineCallback",
    "Mount",
    "RunResult",
    "RunSpec",
    "Secret",
    "build_command",
    "buildkit_reasons",
    "candidate_paths",
    "default_engine",
    "find_compose",
    "probe_clients",
    "registry_credentials",
    "run_command",
    "select_client",
    "set_default_engine",
    "translate_failure",
]

_DEFAULT: list[Engine] = []


def default_engine() -> Engine:
    """The process-wide engine (a :class:`DockerEngine` on the default runner)."""
    if not _DEFAULT:
        _DEFAULT.append(DockerEngine())
    return _DEFAULT[0]


def set_default_engine(engine: Engine) -> None:
    """Replace the process-wide engine (tests put a fake engine here)."""
    _DEFAULT[:] = [engine]
