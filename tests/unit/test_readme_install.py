"""The README's first screen says how to install fdl and names the two set-up commands;
the extras it lists are the package's, each with what it is for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = "\n".join(README.splitlines()[:45])


def test_the_first_screen_says_how_to_install_and_set_up() -> None:
    for words in ("pipx install", "uv tool install", "pip install", "fdl setup", "fdl init"):
        assert words in FIRST_SCREEN, words
    assert README.index("## Install") < README.index("## On a fresh machine")


def test_the_extras_listed_are_the_packages_own() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    section = README[README.index("## Install") : README.index("## On a fresh machine")]
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \| ", section, re.MULTILINE))
    assert {"plot", "zstd", "kubernetes"} <= listed
    assert listed <= extras, listed - extras


def test_the_setup_commands_exist(run_fdl) -> None:
    for command in (["setup", "--help"], ["init", "--help"]):
        assert run_fdl(command).exit_code == 0, command
