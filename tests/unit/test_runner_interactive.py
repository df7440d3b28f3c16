"""Runner.interactive: a child attached to the terminal, its exit status returned."""

from __future__ import annotations

import pytest

from fdl.errors import EnvironmentProblem
from fdl.runner import Completed, SubprocessRunner
from tests.support.fakes import FakeRunner


def test_subprocess_runner_returns_the_exit_status_without_raising() -> None:
    assert SubprocessRunner().interactive(["sh", "-c", "exit 3"]) == 3


def test_subprocess_runner_reports_a_missing_program() -> None:
    with pytest.raises(EnvironmentProblem, match="was not found on PATH"):
        SubprocessRunner().interactive(["fdl-no-such-program-xyz"])


def test_fake_runner_answers_and_records() -> None:
    runner = FakeRunner({("docker", "run"): Completed([], 5)})
    assert runner.interactive(["docker", "run", "-it", "img"]) == 5
    assert runner.calls == [["docker", "run", "-it", "img"]]
