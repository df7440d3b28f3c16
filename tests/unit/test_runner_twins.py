"""FakeRunner and SubprocessRunner, twins: the same scenarios run on both (issue 46: the fake
was held to the real runner's signatures only). Each program is written once, as a script
the real runner runs and as the answer the fake gives, so every assert below is about what
a caller of either sees: the result, the error, the lines streamed, in that order."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.runner import Completed, Runner, SubprocessRunner
from tests.support.fakes import FakeRunner


@dataclass(frozen=True)
class Program:
    """A program that prints ``stdout`` then ``stderr`` and exits with ``code``."""

    name: str
    stdout: str = ""
    stderr: str = ""
    code: int = 0


PROGRAMS = (
    Program("says", "one\ntwo\n"),
    Program("warns", "result\n", "a warning\n"),
    Program("fails", "partial\n", "line 1\nthe reason\n", 3),
    Program("fails-quietly", "only stdout\n", "", 2),
    Program("chatty", "x" * 5000),
)


def _real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Runner, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in PROGRAMS:
        script = bin_dir / program.name
        script.write_text(
            "#!/bin/sh\n"
            f"printf %s {shlex.quote(program.stdout)}\n"
            f"printf %s {shlex.quote(program.stderr)} >&2\n"
            f"exit {program.code}\n"
        )
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return SubprocessRunner(), str(bin_dir)


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Runner, str]:
    bin_dir = str(tmp_path / "bin")
    runner = FakeRunner(
        {(p.name,): Completed([], p.code, p.stdout, p.stderr) for p in PROGRAMS},
        programs={p.name: f"{bin_dir}/{p.name}" for p in PROGRAMS},
    )
    return runner, bin_dir


@pytest.fixture(params=[_real, _fake], ids=["SubprocessRunner", "FakeRunner"])
def twin(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    make: Callable[..., tuple[Runner, str]] = request.param
    return make(tmp_path, monkeypatch)


def test_run_keeps_stdout_and_stderr_apart(twin) -> None:
    runner, _ = twin
    done = runner.run(["warns", "--flag"])
    assert (done.argv, done.returncode, done.stdout, done.stderr) == (
        ["warns", "--flag"], 0, "result\n", "a warning\n",
    )  # fmt: skip
    assert done.ok


def test_a_failure_is_an_error_with_the_status_and_the_tail(twin) -> None:
    runner, _ = twin
    with pytest.raises(CommandFailed) as caught:
        runner.run(["fails", "a b"])
    assert caught.value.returncode == 3 and caught.value.argv == ["fails", "a b"]
    assert caught.value.message == "`fails a b` exited with status 3"
    assert caught.value.details == "line 1\nthe reason"  # stderr's tail, not stdout's
    with pytest.raises(CommandFailed) as quiet:
        runner.run(["fails-quietly"])
    assert quiet.value.details == "only stdout"  # no stderr: stdout's tail


def test_unchecked_a_failure_is_a_result(twin) -> None:
    runner, _ = twin
    done = runner.run(["fails"], check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "partial\n", "line 1\nthe reason\n")
    assert not done.ok


def test_a_missing_program_says_so_with_the_fix(twin) -> None:
    runner, _ = twin
    for call in (
        lambda: runner.run(["no-such-program-here"]),
        lambda: runner.stream(["no-such-program-here"]),
    ):
        with pytest.raises(EnvironmentProblem) as caught:
            call()
        assert caught.value.message == "`no-such-program-here` was not found on PATH"
        assert caught.value.hint == "install no-such-program-here, or add its directory to PATH"


def test_which_finds_what_is_on_path(twin) -> None:
    runner, bin_dir = twin
    assert runner.which("says") == f"{bin_dir}/says"
    assert runner.which("no-such-program-here") is None


def test_stream_gives_each_line_then_the_merged_tail(twin) -> None:
    runner, _ = twin
    lines: list[str] = []
    done = runner.stream(["warns"], on_line=lines.append)
    assert lines == ["result", "a warning"]
    assert (done.returncode, done.stdout, done.stderr) == (0, "result\na warning", "")


def test_a_failed_stream_names_its_output_and_its_log(twin, tmp_path: Path) -> None:
    runner, _ = twin
    log = tmp_path / "logs" / "build.log"
    with pytest.raises(CommandFailed) as caught:
        runner.stream(["fails"], log_file=log)
    assert caught.value.returncode == 3
    assert caught.value.message == f"`fails` exited with status 3 (full log: {log})"
    assert caught.value.details == "partial\nline 1\nthe reason"
    assert log.read_text() == "partial\nline 1\nthe reason\n"


def test_output_over_the_bound_is_an_error(twin) -> None:
    runner, _ = twin
    with pytest.raises(CommandFailed) as caught:
        runner.run(["chatty"], max_output=1000)
    assert caught.value.message == "`chatty` printed more than 1000 bytes"
    assert runner.run(["chatty"], max_output=10_000).stdout == "x" * 5000


def test_measure_and_interactive_give_the_status(twin) -> None:
    runner, _ = twin
    measured = runner.measure(["fails"])
    assert (measured.returncode, measured.stdout, measured.timed_out) == (3, "partial\n", False)
    assert runner.interactive(["says"]) == 0
