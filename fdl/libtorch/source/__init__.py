"""``fdl libtorch build``: libtorch from source for exactly the GPU archs you have.

Plan, then execute::

    request = merge_requests(recipe.request, manifest_request, cli_request)
    facts = probe_machine(context.libtorch_dir)          # or MachineFacts(...) in tests
    plan = plan_build(request, facts)                    # pure; raises before any work
    result = run_build(plan, on_line=print)              # native or Docker, then verified

- :mod:`._request`: what was asked (CLI flags > ``libtorch.build`` in fdl.yml > recipe).
- :mod:`._facts`: what the machine has (GPUs, nvcc, compilers, docker, RAM, disk).
- :mod:`._plan` / :mod:`._layout`: the decisions; :mod:`._checks`: the preconditions.
- :mod:`._native` / :mod:`._docker`: the backends; :mod:`._cache`: ccache/sccache;
  :mod:`._status`: the live status line; :mod:`._finish`: verify, metadata, activate.
"""

from __future__ import annotations

from fdl.libtorch.source._buildplan import BuildPlan, Command, DockerPart
from fdl.libtorch.source._cache import CachePlan, CacheStats, mask
from fdl.libtorch.source._checks import Problem
from fdl.libtorch.source._facts import MachineFacts, Nvcc, SourceFacts, probe_machine, probe_source
from fdl.libtorch.source._finish import VerificationFailed
from fdl.libtorch.source._plan import plan_build
from fdl.libtorch.source._recipes import Recipe, find_recipe, list_recipes, load_recipe
from fdl.libtorch.source._request import (
    BuildRequest,
    BuildSetting,
    Setting,
    build_fields,
    build_settings,
    build_spec,
    command_line_request,
    merge_requests,
    request_from_mapping,
)
from fdl.libtorch.source._run import BuildResult, run_build
from fdl.libtorch.source._sources import gather_request
from fdl.libtorch.source._status import BuildStatus, StatusParser, compiled_objects

__all__ = [
    "FIELDS",
    "BuildPlan",
    "BuildRequest",
    "BuildResult",
    "BuildSetting",
    "BuildStatus",
    "CachePlan",
    "CacheStats",
    "Command",
    "DockerPart",
    "MachineFacts",
    "Nvcc",
    "Problem",
    "Recipe",
    "Setting",
    "SourceFacts",
    "StatusParser",
    "VerificationFailed",
    "build_fields",
    "build_settings",
    "build_spec",
    "command_line_request",
    "compiled_objects",
    "find_recipe",
    "gather_request",
    "list_recipes",
    "load_recipe",
    "mask",
    "merge_requests",
    "plan_build",
    "probe_machine",
    "probe_source",
    "request_from_mapping",
    "run_build",
]


def __getattr__(name: str) -> object:
    # FIELDS is built on first use: the manifest schema asks for it (libtorch.build).
    if name == "FIELDS":
        return {"build": build_spec()}
    raise AttributeError(name)
