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

from fdl._lazy import lazy_attribute

TYPE_CHECKING = False  # names are imported on first use (start-up time)
if TYPE_CHECKING:
    from typing import Any


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
    "recall_compose",
    "registry_credentials",
    "run_command",
    "select_client",
    "set_default_engine",
    "translate_failure",
]

# <lazy-exports> generated from the modules' __all__ by `python -m fdl._lazy_tables --write`
if TYPE_CHECKING:
    from fdl.engine._argv import build_command, buildkit_reasons, run_command
    from fdl.engine._client import probe_clients, select_client
    from fdl.engine._compose import find_compose
    from fdl.engine._credentials import registry_credentials
    from fdl.engine._docker import DockerEngine
    from fdl.engine._facts import translate_failure
    from fdl.engine._memory import recall_compose
    from fdl.engine._paths import candidate_paths
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
_HOMES = {
    "build_command": "_argv",
    "buildkit_reasons": "_argv",
    "run_command": "_argv",
    "probe_clients": "_client",
    "select_client": "_client",
    "find_compose": "_compose",
    "registry_credentials": "_credentials",
    "DockerEngine": "_docker",
    "translate_failure": "_facts",
    "recall_compose": "_memory",
    "candidate_paths": "_paths",
    "Builder": "_types",
    "BuildResult": "_types",
    "BuildSpec": "_types",
    "BuildStep": "_types",
    "ClientSelection": "_types",
    "ComposeCommand": "_types",
    "DiskUsage": "_types",
    "DockerClient": "_types",
    "Engine": "_types",
    "ImageInfo": "_types",
    "Layer": "_types",
    "LineCallback": "_types",
    "Mount": "_types",
    "RunResult": "_types",
    "RunSpec": "_types",
    "Secret": "_types",
}
# </lazy-exports>

_DEFAULT: list[Engine] = []


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, globals(), name)


def default_engine() -> Engine:
    """The process-wide engine (a :class:`DockerEngine` on the default runner)."""
    if not _DEFAULT:
        from fdl.engine._docker import DockerEngine

        _DEFAULT.append(DockerEngine())
    return _DEFAULT[0]


def set_default_engine(engine: Engine) -> None:
    """Replace the process-wide engine (tests put a fake engine here)."""
    _DEFAULT[:] = [engine]
