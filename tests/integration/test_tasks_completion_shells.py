"""The completion scripts work in the real shells (candidates come from `fdl __complete`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.tasks_helpers import write

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def shell_env(tmp_path: Path) -> dict[str, str]:
    """PATH with an `fdl` that runs this checkout, and a project as the working directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "fdl"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fdl "$@"\n')
    wrapper.chmod(0o755)
    write(
        tmp_path / "proj",
        {
            "fdl.yml": "commands:\n  greet: {run: echo hi}\n  train:\n",
            "train/fdl.yml": """\
            entry: python3 train.py
            schema:
              options:
                model: {type: string, choices: [mlp, lenet]}
            commands:
              quick: {description: Fast run, options: {model: lenet}}
            """,
        },
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FDL")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", PYTHONPATH=str(REPO), HOME=str(tmp_path))
    return env


def run_shell(argv: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    proc = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


def bash_complete(line: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    words = " ".join(f"'{w}'" for w in line)
    script = (
        'eval "$(fdl completions bash)"; '
        f"COMP_WORDS=({words}); COMP_CWORD={len(line) - 1}; "
        '_fdl_complete; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    return run_shell(["bash", "-c", script], env, cwd)


def test_bash(shell_env: dict[str, str], tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    assert bash_complete(["fdl", "gr"], shell_env, cwd) == ["greet"]
    assert bash_complete(["fdl", "train", ""], shell_env, cwd) == ["quick"]
    assert bash_complete(["fdl", "train", "--model", ""], shell_env, cwd) == ["mlp", "lenet"]
    assert bash_complete(["fdl", "train", "--model", "=", "l"], shell_env, cwd) == ["lenet"]
    assert bash_complete(["fdl", "completions", "z"], shell_env, cwd) == ["zsh"]
    (cwd / "notes.txt").write_text("")
    assert bash_complete(["fdl", "greet", "--", "no"], shell_env, cwd) == ["notes.txt"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh(shell_env: dict[str, str], tmp_path: Path) -> None:
    # Stand-ins for the completion system: record what _fdl offers.
    script = (
        "compdef() { :; }; "
        "_describe() { print -l -- ${(P)4}; }; "
        "_files() { print -- FILES; }; "
        'eval "$(fdl completions zsh)"; '
        "words=(fdl train ''); CURRENT=3; _fdl; "
        "words=(fdl train --model ''); CURRENT=4; _fdl; "
        "words=(fdl greet -- x); CURRENT=4; _fdl"
    )
    lines = run_shell(["zsh", "-f", "-c", script], shell_env, tmp_path / "proj")
    assert lines == ["quick:Fast run", "mlp", "lenet", "FILES"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish(shell_env: dict[str, str], tmp_path: Path) -> None:
    script = (
        "fdl completions fish | source; complete -C 'fdl train '; complete -C 'fdl train --model l'"
    )
    lines = run_shell(["fish", "--no-config", "-c", script], shell_env, tmp_path / "proj")
    assert lines == ["quick\tFast run", "lenet"]
