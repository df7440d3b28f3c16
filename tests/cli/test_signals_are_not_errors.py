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


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_the_cpu_view_reads_the_index_ends_fdl(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    """The CPU view's long phase, reading ranges of a wheel: a signal there is exit
    143/130, with no variant or staging left (the server stalls: fdl waits on it)."""
    import subprocess
    import sys
    import time

    from tests.conftest import REPO
    from tests.support.cpu_view_wheels import TORCH, TORCH_WHEEL, PackageIndex
    from tests.support.faulty_http import FaultyServer, Stall

    with FaultyServer() as server:
        index = PackageIndex(server)
        index.add_torch()
        wheel = index.file_path(TORCH_WHEEL)
        server.script(wheel, *[Stall(after=0, seconds=60)] * 20)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
        environ.update(
            PYTHONPATH=str(REPO),
            FDL_HOME=str(tmp_path / "home"),
            FDL_CACHE_DIR=str(tmp_path / "cache"),
        )
        args = ["libtorch", "install", "--from-wheel", "--cpu", "--torch", TORCH]
        proc = subprocess.Popen(
            [sys.executable, "-m", "fdl", *args, "--index-url", index.url],
            env=environ,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            for _ in range(600):  # until fdl waits on the stalled wheel (at most 60 s)
                if server.requests_to(wheel) or proc.poll() is not None:
                    break
                time.sleep(0.1)
            assert server.requests_to(wheel), proc.poll()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == code, err
    assert "internal error" not in err and "Traceback" not in err
    precompiled = tmp_path / "home" / "libtorch" / "precompiled"
    assert not precompiled.is_dir() or list(precompiled.iterdir()) == []
