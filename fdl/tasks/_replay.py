"""A project command's plan, kept after a real run and replayed by the next identical one.

``fdl <command>`` plans before it runs: the session, the manifest's layers, the resolver,
the active libtorch, the compose file, the docker probes' memory (about 40 ms of imports
and work). The plan is a function of what planning read, so a run that read the same
things gets the same plan: :mod:`fdl._recorded` records what planning reads and keeps the
plan (:func:`keep_plan`) with its signatures, and :func:`replay_plan` runs it the next time
when none has changed: the recorded messages (the plan's notes) are written again byte for
byte, and the same argv runs in the same directory with the same environment through the
same foreground runner (signals forwarded, the group ended and reaped), without the
manifest or the planner.

Besides what fdl._recorded refuses, a plan is not kept when the command is not a plain
``run:`` (entries and presets), builds (cargo or CMake: their checks ask rustc; a failure
adds a note), has an image to build first, or wrote to stdout.
"""

from __future__ import annotations

import os

from fdl._recorded import OUTPUT, keep, kept_tagged, recording, stop, write_output

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from fdl.tasks._plan import CommandPlan

__all__ = ["keep_plan", "replay_plan"]

PLAN = "plan"


def keep_plan(plan: CommandPlan, environ: Mapping[str, str], console: Any) -> None:
    """The plan about to run (with ``environ``, what fdl runs it in), kept for the next
    identical run when nothing but files went into it; recording stops either way."""
    recorder = recording()
    if recorder is None:
        return
    if recorder.out or plan.kind != "run" or (plan.docker and plan.docker.profile is not None):
        stop(console)
        return
    from fdl.tasks._framework_env import build_tools

    if build_tools(plan.script):
        stop(console)
        return
    base = dict(os.environ)
    payload = (
        tuple(plan.argv),
        str(plan.cwd),
        _diff(base, environ),
        _diff(base, plan.environ(environ)),
        "".join(recorder.said),
        tuple(plan.docker.compose) if plan.docker is not None and plan.docker.remembered else None,
    )
    keep(console, PLAN, payload)


def _diff(
    base: Mapping[str, str], changed: Mapping[str, str]
) -> tuple[tuple[str, str | None], ...]:
    made: list[tuple[str, str | None]] = [
        (name, value) for name, value in changed.items() if base.get(name) != value
    ]
    return (*made, *((name, None) for name in base if name not in changed))


def _applied(base: Mapping[str, str], diff: Any) -> dict[str, str]:
    env = dict(base)
    for name, value in diff:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def replay_plan(args: Sequence[str], console: Any) -> int | None:
    """Run ``fdl ARGS`` from its kept plan (or write its kept dry run) and return the exit
    status; None when nothing is kept for this run or anything it depended on has changed
    (then plan as usual).

    Raises:
        EnvironmentProblem: the program is missing (as the planned run says), or compose
            failed and docker now answers otherwise (fdl.tasks.recheck_engine).
    """
    found = kept_tagged(args)
    if found is None:
        return None
    tag, payload = found
    if tag == OUTPUT:  # its --dry-run: what it printed
        return write_output(payload, console)
    if tag != PLAN:
        return None
    try:
        argv, cwd, base_diff, final_diff, said, compose = payload
        base = dict(os.environ)
        environ, env = _applied(base, base_diff), _applied(base, final_diff)
        argv = [str(part) for part in argv]
        if not argv or not isinstance(cwd, str) or not isinstance(said, str):
            return None
    except (TypeError, ValueError):  # none kept, or not in this shape
        return None
    if said:
        console.stderr.write(said)
        console.stderr.flush()
    from fdl._foreground import run_foreground

    try:
        status = run_foreground(argv, cwd=cwd, env=env)
    except FileNotFoundError:
        from fdl.runner import missing_program

        raise missing_program(argv[0]) from None
    if compose is not None and 0 < status < 128:
        from fdl.tasks._docker import recheck_engine

        changed = recheck_engine(list(compose), environ)
        if changed:
            console.note(changed)
    return status
