"""The check of a shell script fdl writes (an sbatch job, a task's script): bash parses it,
and shellcheck, where installed, finds nothing in it."""

from __future__ import annotations

import shutil
import subprocess


def assert_bash_accepts(script: str, context: object = None) -> None:
    """``bash -n`` and ``shellcheck -s bash`` on ``script`` (shellcheck only where it is on
    PATH); a failure shows ``context``, what they said and the script's end."""
    parsed = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert parsed.returncode == 0, (context, parsed.stderr, script[-2000:])
    if shutil.which("shellcheck"):
        checked = subprocess.run(
            ["shellcheck", "-s", "bash", "-"], input=script, text=True, capture_output=True
        )
        assert checked.returncode == 0, (context, checked.stdout[-2000:], script[-2000:])
