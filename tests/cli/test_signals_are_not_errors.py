"""Issue 42, point 7: a signal is never caught as an error. `fdl setup` looks at the torch
installed for the user's Python and skips a Python that fails (`except FdlError`); SIGTERM
or SIGINT arriving then was taken for such a failure and setup went on (exit 0). Now fdl
ends with 143 or 130 and what it started is gone."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from fdl.errors import FdlError, Interrupted, Terminated
from tests.conftest import run_fdl_process


def _python_that_signals(tmp_path: Path, name: str) -> Path:
    """A ``python`` that sends fdl (its parent) ``name``, writes its pid, and waits."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(
        f"#!/bin/sh\necho $$ > {tmp_path / 'child.pid'}\nkill -{name} $PPID\nexec sleep 300\n"
    )
    python.chmod(0o755)
    return venv


@pytest.mark.parametrize(("name", "code"), [("TERM", 143), ("INT", 130)])
def test_a_signal_during_setup_s_look_at_the_installed_torch_ends_fdl(
    tmp_path: Path, name: str, code: int
) -> None:
    venv = _python_that_signals(tmp_path, name)
    (tmp_path / "work").mkdir()
    env = {
        "VIRTUAL_ENV": str(venv),
        "FDL_HOME": str(tmp_path / "home"),
        "FDL_CACHE_DIR": str(tmp_path / "cache"),
    }
    result = run_fdl_process(["setup", "--dry-run"], cwd=tmp_path / "work", env=env, timeout=120)
    assert result.exit_code == code, result.output
    assert "[dry-run]" not in result.output  # setup did not go on as if nothing happened
    assert "internal error" not in result.output and "Traceback" not in result.output
    child = int((tmp_path / "child.pid").read_text())
    with pytest.raises(ProcessLookupError):  # the Python fdl started is not left running
        os.kill(child, 0)


def test_no_except_fdlerror_or_except_exception_takes_a_signal() -> None:
    for stop in (Interrupted(), Terminated()):
        assert not isinstance(stop, (FdlError, Exception))
    assert int(Terminated().exit_code) == 128 + signal.SIGTERM
    assert int(Interrupted().exit_code) == 128 + signal.SIGINT
