"""The README's first screen says how to install fdl (pipx with the wheel) and names the two
set-up commands; the manual's Install page lists the package's extras, each with what it is
for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = "\n".join(README.splitlines()[:45])
INSTALL = (REPO / "docs" / "install.md").read_text(encoding="utf-8")


def _version() -> str:
    text = (REPO / "fdl" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    assert found
    return found.group(1)


def test_the_first_screen_says_how_to_install_and_set_up() -> None:
    for words in ("pipx install", "uv tool install", "pip wheel", "fdl setup", "fdl init"):
        assert words in FIRST_SCREEN, words
    # the wheel the install line names is the one this version builds
    assert f"pipx install dist/fdl-{_version()}-py3-none-any.whl" in FIRST_SCREEN
    assert README.index("## Install") < README.index("## Quick start")


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 300


def test_the_extras_listed_are_the_packages_own() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    section = INSTALL[INSTALL.index("## Extras") :]
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \| ", section, re.MULTILINE))
    assert {"plot", "zstd", "kubernetes", "nvml"} <= listed
    assert listed <= extras, listed - extras


def test_the_setup_commands_exist(run_fdl) -> None:
    for command in (["setup", "--help"], ["init", "--help"]):
        assert run_fdl(command).exit_code == 0, command
