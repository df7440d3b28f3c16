"""Ctrl-C and SIGTERM reach the command fdl runs; fdl exits with the child's status."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tasks_helpers import write

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # readiness waits only; nothing asserts on durations
# What is left running is checked the instant fdl has exited, with every core busy.
pytestmark = pytest.mark.usefixtures("busy_cores")

# The process that must receive the signal writes the readiness file itself: a shell's
# `touch started; sleep 300` could take the signal between the two commands, start the
# sleep afterwards and make the test hang or fail (about 1 run in 8 on a loaded machine).
SLEEPER = """\
import pathlib, time
pathlib.Path("started").write_text("")
time.sleep(300)
"""

TRAP = """\
import pathlib, signal, sys, time
def stop(signum, frame):
    pathlib.Path("stopped-by").write_text(signal.Signals(signum).name)
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
pathlib.Path("started").write_text("")
time.sleep(300)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        {
            "trap.py": TRAP,
            "sleeper.py": SLEEPER,
            "fdl.yml": """\
            commands:
              long-running:
                run: python3 sleeper.py; echo after
              trapping:
                run: python3 trap.py
            """,
        },
    )


def environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    env["PYTHONPATH"] = str(REPO)
    return env


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.05)


def _reap(pid: int) -> int:
    """The child's wait status; killed (and the test failed) if it outlives WAIT."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"fdl did not end within {WAIT:.0f} s of Ctrl-C at its terminal")


def survivors(project: Path) -> list[int]:
    """Live processes started for this project (they carry FDL_PROJECT_ROOT=<project>)."""
    marker = f"FDL_PROJECT_ROOT={project}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _sigint_handled() -> Iterator[None]:
    """fdl gets SIGINT as from a shell: a test run started in the background (nohup, `&`
    in a script) ignores it, and an ignored signal stays ignored across fork and exec; a
    handled one is reset to the default there."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def start(project: Path, command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fdl", command],
        cwd=project,
        env=environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigint_stops_the_script_and_its_children_exit_130(project: Path) -> None:
    proc = start(project, "long-running")
    wait_for(project / "started")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=WAIT)
    assert proc.returncode == 130
    assert "after" not in out
    assert survivors(project) == []


def test_sigint_reaches_a_program_that_handles_it(project: Path) -> None:
    proc = start(project, "trapping")
    wait_for(project / "started")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=WAIT)
    assert (project / "stopped-by").read_text() == "SIGINT"
    assert proc.returncode == 130


def test_sigterm_is_forwarded(project: Path) -> None:
    proc = start(project, "trapping")
    wait_for(project / "started")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=WAIT)
    assert (project / "stopped-by").read_text() == "SIGTERM"
    assert proc.returncode == 128 + signal.SIGTERM


def test_ctrl_c_at_a_terminal(project: Path) -> None:
    """In a terminal the child shares fdl's process group and gets the terminal's Ctrl-C."""
    pid, master = pty.fork()
    if pid == 0:  # the child: fdl on a fresh terminal, as a shell there would start it
        os.chdir(project)
        os.execve(sys.executable, [sys.executable, "-m", "fdl", "long-running"], environ())
    try:
        wait_for(project / "started")
        os.write(master, b"\x03")
        status = _reap(pid)
    finally:
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 130
    assert survivors(project) == []


def test_stdin_is_a_terminal_for_interactive_commands(tmp_path: Path) -> None:
    root = write(tmp_path, {"fdl.yml": "commands:\n  tty: {run: 'test -t 0 && echo on-a-tty'}\n"})
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(root)
        os.execve(sys.executable, [sys.executable, "-m", "fdl", "tty"], environ())
    output = b""
    try:
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"on-a-tty" in output
