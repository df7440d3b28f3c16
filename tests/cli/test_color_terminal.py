"""Colour is decided by whether stderr is a terminal: a real one (a pseudo-terminal) gets
colour, a pipe or a file does not; NO_COLOR and TERM=dumb turn it off on a terminal too.
(`run_fdl` sets NO_COLOR for every other test, so only these reach the decision.)"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from fdl.cli._console import wants_color
from tests.conftest import REPO

RED = "\x1b[31"
MESSAGE = "no fdl.yml"  # what `config show` says where there is no manifest


def _environ(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "FORCE_COLOR", "TERM") and not k.startswith("FDL__")
    }
    env["PYTHONPATH"] = str(REPO)
    env["TERM"] = "xterm-256color"
    env.update(extra)
    return env


def _on_a_terminal(cwd: Path, **extra: str) -> tuple[int, str]:
    """Run `fdl config show` with stderr on a pseudo-terminal: its exit and what it showed."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fdl", "config", "show"],
            cwd=cwd,
            env=_environ(**extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=follower,
        )
    finally:
        os.close(follower)
    shown = b""
    try:
        while chunk := os.read(leader, 4096):
            shown += chunk
    except OSError:  # EIO: the terminal's other end closed (the process ended)
        pass
    finally:
        os.close(leader)
    return proc.wait(timeout=60), shown.decode()


def _on_a_pipe(cwd: Path, **extra: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "fdl", "config", "show"],
        cwd=cwd,
        env=_environ(**extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, proc.stderr


def test_an_error_on_a_terminal_is_coloured_and_on_a_pipe_is_not(tmp_path: Path) -> None:
    code, shown = _on_a_terminal(tmp_path)
    assert code == 3, shown
    assert MESSAGE in shown and RED in shown, repr(shown)
    code, piped = _on_a_pipe(tmp_path)
    assert code == 3, piped
    assert MESSAGE in piped
    assert "\x1b[" not in piped, repr(piped)


@pytest.mark.parametrize(
    ("extra", "why"),
    [({"NO_COLOR": "1"}, "NO_COLOR"), ({"TERM": "dumb"}, "TERM=dumb")],
    ids=["NO_COLOR", "TERM=dumb"],
)
def test_a_terminal_gets_no_colour_when_asked_not_to(
    tmp_path: Path, extra: dict[str, str], why: str
) -> None:
    code, shown = _on_a_terminal(tmp_path, **extra)
    assert code == 3, shown
    assert MESSAGE in shown, repr(shown)
    assert "\x1b[" not in shown, (why, repr(shown))


def test_the_decision_reads_the_stream_it_writes_to(tmp_path: Path) -> None:
    """wants_color itself: a pseudo-terminal yes; a pipe, a file, a string buffer no;
    --no-color beats a terminal; FORCE_COLOR beats a pipe."""
    leader, follower = pty.openpty()
    read_end, write_end = os.pipe()
    with (
        open(follower, "w", closefd=True) as terminal,
        open(write_end, "w", closefd=True) as pipe,
        open(tmp_path / "log", "w") as file,
    ):
        env = {"TERM": "xterm"}
        assert wants_color(terminal, False, env) is True
        assert wants_color(pipe, False, env) is False
        assert wants_color(file, False, env) is False
        assert wants_color(terminal, True, env) is False
        assert wants_color(pipe, False, {**env, "FORCE_COLOR": "1"}) is True
    os.close(leader)
    os.close(read_end)
