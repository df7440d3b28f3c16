"""floDl 0.8.0's built-ins fdl answers: `fdl autocomplete` (its spelling of installing
`fdl completions`, flodl-cli-0.8.0/src/completions/mod.rs:367-480) and the launcher
commands fdl does not build (`status`, `start`, `join`, `join-config`, `publish`; `nccl` is `fdl nccl build` now),
which say what they are and what to run instead; a project command of such a
name still runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.cli._rc_block import MARKER, detect_shell, with_block

FLODL_ONLY = ["status", "start", "join", "join-config", "publish"]


def test_autocomplete_adds_one_block_and_replaces_an_earlier_one(run_fdl, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    rc = home / ".bashrc"
    # what floDl's own `fdl autocomplete` leaves: the same markers
    rc.write_text(f"export A=1\n{MARKER}\neval old\n{MARKER} end\nalias x=y")
    env = {"HOME": str(home), "SHELL": "/bin/bash"}
    result = run_fdl(["autocomplete"], cwd=tmp_path, env=env)
    assert result.exit_code == 0, result.output
    text = rc.read_text()
    assert text == (
        f'export A=1\nalias x=y\n\n{MARKER}\neval "$(fdl completions bash)"\n{MARKER} end\n'
    )
    assert run_fdl(["autocomplete"], cwd=tmp_path, env=env).exit_code == 0
    assert rc.read_text() == text  # run again: still one block
    assert "eval old" not in text


def test_autocomplete_follows_the_shell_and_dry_run_writes_nothing(run_fdl, tmp_path) -> None:
    env = {"HOME": str(tmp_path), "SHELL": "/usr/bin/fish"}
    shown = run_fdl(["autocomplete", "--dry-run"], cwd=tmp_path, env=env)
    assert shown.exit_code == 0, shown.output
    assert "eval (fdl completions fish | string collect)" in shown.stdout
    assert not (tmp_path / ".config").exists()
    assert run_fdl(["autocomplete", "zsh"], cwd=tmp_path, env=env).exit_code == 0
    assert 'eval "$(fdl completions zsh)"' in (tmp_path / ".zshrc").read_text()
    wrong = run_fdl(["autocomplete", "tcsh"], cwd=tmp_path, env=env)
    assert wrong.exit_code == 2 and "use bash, zsh or fish" in wrong.stderr


def test_the_rc_block_rules() -> None:
    assert detect_shell({"SHELL": "/bin/zsh"}) == "zsh"
    assert detect_shell({}) == "bash"
    assert with_block("", "bash") == f'\n{MARKER}\neval "$(fdl completions bash)"\n{MARKER} end\n'


@pytest.mark.parametrize("name", FLODL_ONLY)
def test_floDl_launcher_commands_say_what_they_are_and_what_to_run(run_fdl, tmp_path, name) -> None:
    (tmp_path / "fdl.yml").write_text("commands:\n  build: {run: echo build}\n")
    result = run_fdl([name, "--json"], cwd=tmp_path)
    assert result.exit_code == 2, result.output
    assert f"`fdl {name}` is a command of floDl's CLI (its " in result.stderr
    assert "fix: use " in result.stderr
    assert "unknown command" not in result.stderr


def test_a_project_command_named_like_one_of_them_runs(run_fdl, tmp_path: Path) -> None:
    """fdl init's scaffold declares `start`; floDl's CLI would run its own built-in first
    (main.rs:159-213), fdl runs the project's."""
    (tmp_path / "fdl.yml").write_text("commands:\n  start: {run: echo started}\n")
    result = run_fdl(["start", "--dry-run"], cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "echo started" in result.stdout
