"""``fdl libtorch build``: libtorch from source for exactly the GPU archs you have.

Plan, then execute::

    request = build_request(manifest, {"archs": ("6.1;12.0", "--archs")}, cwd)
    # layers: recipe < fdl.yml (overlays, FDL__, --set) < the options
    facts = probe_machine(context.libtorch_dir)          # or MachineFacts(...) in tests
    plan = plan_build(request, facts)                    # pure; raises before any work
    result = run_build(plan, on_line=print)              # native or Docker, then verified

- :mod:`._request` / :mod:`._from_manifest`: what was asked, read from the merged manifest
  (recipe < ``libtorch.build`` in fdl.yml < the command line's options).
- :mod:`._facts`: what the machine has (GPUs, nvcc, compilers, docker, RAM, disk).
- :mod:`._plan`: the planner, in stages read top to bottom (request -> facts of the build ->
  checks -> plan); :mod:`._checks`: the preconditions it runs; :mod:`._layout`: paths,
  commands and image of the plan.
- :mod:`._native` / :mod:`._docker`: the backends; :mod:`._cache`: ccache/sccache;
  :mod:`._status`: the live status line; :mod:`._finish`: verify, metadata, activate.
"""

from __future__ import annotations

from fdl.libtorch.build._buildplan import BuildPlan, Command, DockerPart
from fdl.libtorch.build._cache import CachePlan, CacheStats, mask
from fdl.libtorch.build._checks import Problem
from fdl.libtorch.build._estimate import BuildEstimate, estimate_build, estimate_table
from fdl.libtorch.build._facts import (
    MachineFacts,
    Nvcc,
    SourceFacts,
    declared_submodules,
    probe_machine,
    probe_source,
    project_framework,
)
from fdl.libtorch.build._finish import VerificationFailed
from fdl.libtorch.build._from_manifest import (
    build_request,
    check_source_release,
    manifest_request,
    tree_request,
)
from fdl.libtorch.build._plan import plan_build
from fdl.libtorch.build._request import (
    BuildRequest,
    BuildSetting,
    Setting,
    build_fields,
    build_settings,
    build_spec,
    request_from_mapping,
)
from fdl.libtorch.build._rocm import (
    RocmBuildFacts,
    RocmBuildPlan,
    parse_rocm_archs,
    plan_rocm_build,
    rocm_build_facts,
)
from fdl.libtorch.build._run import BuildResult, fetch_sources, run_build
from fdl.libtorch.build._status import BuildStatus, StatusParser, compiled_objects

__all__ = [
    "FIELDS",
    "BuildEstimate",
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
    "RocmBuildFacts",
    "RocmBuildPlan",
    "Setting",
    "SourceFacts",
    "StatusParser",
    "VerificationFailed",
    "build_fields",
    "build_request",
    "build_settings",
    "build_spec",
    "check_source_release",
    "compiled_objects",
    "declared_submodules",
    "estimate_build",
    "estimate_table",
    "fetch_sources",
    "manifest_request",
    "mask",
    "parse_rocm_archs",
    "plan_build",
    "plan_rocm_build",
    "probe_machine",
    "probe_source",
    "project_framework",
    "request_from_mapping",
    "rocm_build_facts",
    "run_build",
    "tree_request",
]


def __getattr__(name: str) -> object:
    # FIELDS is built on first use: the manifest schema asks for it (libtorch.build).
    if name == "FIELDS":
        return {"build": build_spec()}
    raise AttributeError(name)
