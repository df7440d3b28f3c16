"""The task runner: ``fdl <command>`` runs a command declared in the manifest.

Planning and running are separate::

    invocation = prepare(manifest, "test", ["--", "-p", "foo"], environ=os.environ)
    print(render_script(invocation.plan))   # what --dry-run prints
    code = execute(invocation.plan)         # the child's exit status

A command runs on this machine (in the declaring manifest's directory) or,
with ``docker: <service>``, through ``docker compose run`` in that service,
in the container directory that corresponds to the declaring manifest. The
active libtorch variant is exported either way.
"""

from __future__ import annotations

from fdl.tasks._args import ArgDecl, CommandSchema, OptionDecl
from fdl.tasks._compose import quote
from fdl.tasks._docker import compose_argv, in_container
from fdl.tasks._env import EnvChange
from fdl.tasks._execute import execute
from fdl.tasks._plan import CommandPlan, DockerWrap
from fdl.tasks._prepare import Invocation, prepare
from fdl.tasks._render import render_script
from fdl.tasks._resolve import Kind, Resolution, command_kind, load_nested

__all__ = [
    "ArgDecl",
    "CommandPlan",
    "CommandSchema",
    "DockerWrap",
    "EnvChange",
    "Invocation",
    "Kind",
    "OptionDecl",
    "Resolution",
    "command_kind",
    "compose_argv",
    "execute",
    "in_container",
    "load_nested",
    "prepare",
    "quote",
    "render_script",
]
