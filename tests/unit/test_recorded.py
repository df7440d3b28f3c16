"""fdl._recorded: an answer is kept with the signatures of what went into it, given back
while they hold, and never kept when something else went into it."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from fdl import _recorded

ARGS = ["some", "command"]


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setenv("FDL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FDL_PLAN_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    return SimpleNamespace(stdout=io.StringIO(), stderr=io.StringIO())


def _kept_after(console: SimpleNamespace, work) -> tuple[object, ...] | None:  # type: ignore[no-untyped-def]
    """Record ``work()``, keep ("x",) for it, and what a lookup gives now."""
    _recorded.record(ARGS, console)
    try:
        work()
    finally:
        _recorded.keep(console, "test", ("x",))
    assert _recorded.recording() is None
    assert os.stat is _recorded._STAT  # the wrappers are gone
    return _recorded.kept_answer(ARGS, "test")


def test_what_was_read_unchanged_gives_the_answer_back(console, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("1")
    assert _kept_after(console, (tmp_path / "f").read_text) == ("x",)
    assert _recorded.kept_answer(ARGS, "other kind") is None
    assert _recorded.kept_answer([*ARGS, "more"], "test") is None
    (tmp_path / "f").write_text("22")
    assert _recorded.kept_answer(ARGS, "test") is None


def test_an_absent_path_asked_is_a_dependency(console, tmp_path: Path) -> None:
    assert _kept_after(console, lambda: os.path.exists(tmp_path / "later")) == ("x",)
    (tmp_path / "later").write_text("")
    assert _recorded.kept_answer(ARGS, "test") is None


def test_a_listed_directory_changes_with_its_entries_a_stated_one_does_not(
    console, tmp_path: Path
) -> None:
    (tmp_path / "listed").mkdir()
    (tmp_path / "stated").mkdir()

    def work() -> None:
        os.listdir(tmp_path / "listed")
        assert (tmp_path / "stated").is_dir()

    assert _kept_after(console, work) == ("x",)
    (tmp_path / "stated" / "new").write_text("")
    assert _recorded.kept_answer(ARGS, "test") == ("x",)
    (tmp_path / "listed" / "new").write_text("")
    assert _recorded.kept_answer(ARGS, "test") is None


@pytest.mark.parametrize(
    "work",
    [
        pytest.param(lambda: subprocess.run(["true"], check=False), id="a program"),
        pytest.param(lambda: Path("/proc/self/status").read_text(), id="/proc"),
        pytest.param(lambda: os.stat("x", dir_fd=os.open(".", os.O_RDONLY)), id="dir_fd"),
        pytest.param(lambda: Path("written").write_text("now"), id="a file changed"),
    ],
)
def test_a_run_that_depended_on_more_than_files_keeps_nothing(
    console, tmp_path: Path, work
) -> None:  # type: ignore[no-untyped-def]
    def guarded() -> None:
        with contextlib.suppress(OSError):  # asked: that is what counts
            work()

    assert _kept_after(console, guarded) is None
    assert not (tmp_path / "cache" / "plans").exists() or not list(
        (tmp_path / "cache" / "plans").glob("*.marshal")
    )


def test_the_output_written_is_given_back(console, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("1")
    _recorded.record(ARGS, console)
    console.stdout.write((tmp_path / "f").read_text() + "\n")
    console.stderr.write("note: said\n")
    _recorded.keep_output(console, 3)
    assert _recorded.recording() is None
    again = SimpleNamespace(stdout=io.StringIO(), stderr=io.StringIO())
    assert _recorded.replay_output(ARGS, again) == 3
    assert (again.stdout.getvalue(), again.stderr.getvalue()) == ("1\n", "note: said\n")


def test_nothing_is_kept_or_given_when_turned_off(
    console, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDL_PLAN_CACHE", "0")
    assert _recorded.entry(ARGS) is None
    assert _kept_after(console, lambda: None) is None
    assert not (tmp_path / "cache").exists()
