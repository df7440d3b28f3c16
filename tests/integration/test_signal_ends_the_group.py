"""fdl ended by a signal while a child runs ends the child's whole process group, and exits
only once none of it runs (issue 44): checked the instant fdl is gone, on a loaded machine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.usefixtures("busy_cores")


@pytest.fixture
def pid_files(tmp_path: Path) -> Iterator[Path]:
    """The test's directory; whatever wrote a *.pid there is killed after (a failed test
    leaves nothing running)."""
    yield tmp_path
    for pid_file in tmp_path.glob("*.pid"):
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


# Ignores SIGTERM (a stubborn helper of the command): only SIGKILL ends it.
STUBBORN = "trap '' TERM; echo $$ > stubborn.pid; while :; do sleep 0.05; done\n"


def _running(pid: int) -> bool:
    """Whether the process runs (a zombie has ended: only its parent's wait is left)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _wait_for_pid(path: Path, proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 60
    while not (path.is_file() and path.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path.name} never written"
        time.sleep(0.05)
    return int(path.read_text())


def _environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    return {**env, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


def test_sigterm_ends_a_project_commands_stubborn_helper_before_fdl_exits(
    pid_files: Path,
) -> None:
    tmp_path = pid_files
    (tmp_path / "stubborn.sh").write_text(STUBBORN)
    (tmp_path / "fdl.yml").write_text(
        textwrap.dedent(
            """\
            commands:
              train:
                run: "sh stubborn.sh & echo $$ > main.pid; wait"
            """
        )
    )
    fdl = subprocess.Popen(
        [sys.executable, "-m", "fdl", "train"],
        cwd=tmp_path,
        env=_environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stubborn = _wait_for_pid(tmp_path / "stubborn.pid", fdl)
    _wait_for_pid(tmp_path / "main.pid", fdl)
    fdl.send_signal(signal.SIGTERM)
    _, err = fdl.communicate(timeout=60)
    assert fdl.returncode == 143, err
    assert not _running(stubborn), "the command's helper outlived fdl"


DRIVER = """\
import signal, sys
from fdl.runner import SubprocessRunner

def stop(signum, frame):  # as fdl's CLI does: SIGTERM unwinds like an exception
    raise SystemExit(143)

signal.signal(signal.SIGTERM, stop)
SubprocessRunner().stream(["sh", "-c", sys.argv[1]], on_line=print)
"""


def test_sigterm_during_a_streamed_build_ends_the_builds_whole_group(pid_files: Path) -> None:
    tmp_path = pid_files
    # a build tool whose compiler ignores SIGTERM, and one that stops as asked
    (tmp_path / "stubborn.sh").write_text(STUBBORN)
    script = "sh stubborn.sh & sleep 300 & echo $! > sleeper.pid; wait"
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, script],
        cwd=tmp_path,
        env=_environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stubborn = _wait_for_pid(tmp_path / "stubborn.pid", driver)
    sleeper = _wait_for_pid(tmp_path / "sleeper.pid", driver)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 143, err
    assert not _running(stubborn), "the stubborn child outlived the runner"
    assert not _running(sleeper), "the build's child outlived the runner"
