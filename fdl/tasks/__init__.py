"""The task runner: ``fdl <command>`` runs a command declared in the manifest.

Planning and running are separate::

    invocation = prepare(manifest, "test", ["--", "-p", "foo"], environ=os.environ)
    print(render_script(invocation.plan))   # what --dry-run prints
    code = execute(invocation.plan)         # the child's exit status

A command runs on this machine (in the declaring manifest's directory) or,
with ``docker: <service>``, through ``docker compose run`` in that service,
in the container directory that corresponds to the declaring manifest. The
active libtorch variant is exported either way.

Names are imported on first use, so ``fdl --help`` only pays for what it needs.
"""

from __future__ import annotations

from fdl._lazy import lazy_attribute

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = [
    "ArgDecl",
    "CachedSchema",
    "CommandPlan",
    "CommandSchema",
    "ComposeProgram",
    "DockerWrap",
    "EnvChange",
    "Invocation",
    "Kind",
    "OptionDecl",
    "Resolution",
    "cache_file",
    "check_before_run",
    "command_kind",
    "compose_program",
    "enclosing_manifest",
    "ensure_service_image",
    "execute",
    "failure_note",
    "find_caches",
    "format_value",
    "hostname_change",
    "in_container",
    "keep_plan",
    "load_nested",
    "nesting",
    "parse_gpus",
    "prepare",
    "preset_problems",
    "probe_key",
    "quote",
    "recheck_engine",
    "render_argv",
    "render_script",
    "replay_plan",
    "schema_of",
    "take_gpus",
]

# <lazy-exports> generated from the modules' __all__ by `python -m fdl._lazy_tables --write`
if TYPE_CHECKING:
    from fdl.tasks._args import ArgDecl, CommandSchema, OptionDecl
    from fdl.tasks._compose import quote
    from fdl.tasks._contract import hostname_change, parse_gpus, take_gpus
    from fdl.tasks._docker import ComposeProgram, compose_program, in_container, recheck_engine
    from fdl.tasks._env import EnvChange
    from fdl.tasks._execute import execute
    from fdl.tasks._images import ensure_service_image
    from fdl.tasks._nested import command_kind, load_nested, preset_problems
    from fdl.tasks._nesting import enclosing_manifest, nesting
    from fdl.tasks._plan import CommandPlan, DockerWrap
    from fdl.tasks._preflight import check_before_run, failure_note
    from fdl.tasks._prepare import Invocation, prepare
    from fdl.tasks._presets import format_value
    from fdl.tasks._probe import CachedSchema, cache_file, find_caches, probe_key, schema_of
    from fdl.tasks._render import render_argv, render_script
    from fdl.tasks._replay import keep_plan, replay_plan
    from fdl.tasks._resolve import Kind, Resolution
_HOMES = {
    "ArgDecl": "_args",
    "CommandSchema": "_args",
    "OptionDecl": "_args",
    "quote": "_compose",
    "hostname_change": "_contract",
    "parse_gpus": "_contract",
    "take_gpus": "_contract",
    "ComposeProgram": "_docker",
    "compose_program": "_docker",
    "in_container": "_docker",
    "recheck_engine": "_docker",
    "EnvChange": "_env",
    "execute": "_execute",
    "ensure_service_image": "_images",
    "command_kind": "_nested",
    "load_nested": "_nested",
    "preset_problems": "_nested",
    "enclosing_manifest": "_nesting",
    "nesting": "_nesting",
    "CommandPlan": "_plan",
    "DockerWrap": "_plan",
    "check_before_run": "_preflight",
    "failure_note": "_preflight",
    "Invocation": "_prepare",
    "prepare": "_prepare",
    "format_value": "_presets",
    "CachedSchema": "_probe",
    "cache_file": "_probe",
    "find_caches": "_probe",
    "probe_key": "_probe",
    "schema_of": "_probe",
    "render_argv": "_render",
    "render_script": "_render",
    "keep_plan": "_replay",
    "replay_plan": "_replay",
    "Kind": "_resolve",
    "Resolution": "_resolve",
}
# </lazy-exports>


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOMES, globals(), name)
