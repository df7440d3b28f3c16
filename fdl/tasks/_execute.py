"""Running a planned command: the child's exit status is fdl's."""

from __future__ import annotations

import os
from collections.abc import Mapping

from fdl.runner import Runner, default_runner
from fdl.tasks._plan import CommandPlan

__all__ = ["execute"]


def execute(
    plan: CommandPlan, *, runner: Runner | None = None, environ: Mapping[str, str] | None = None
) -> int:
    """Run ``plan`` attached to the terminal and return its exit status.

    Args:
        plan: What to run.
        runner: The process seam (default: the process-wide runner).
        environ: The environment the plan's variables are applied to (default: ``os.environ``).

    Raises:
        EnvironmentProblem: the program (``sh``, the compose program) is missing.
    """
    runner = runner or default_runner()
    env = plan.environ(os.environ if environ is None else environ)
    return runner.interactive(plan.argv, cwd=plan.cwd, env=env)
