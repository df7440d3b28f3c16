"""One help style for every built-in (issue 34, point 14): placeholders in capitals as the
README writes them (`--torch TORCH`, `NAME`, `[PROFILES...]`), never click's type names
(`<str>`, `<path>`) nor typer's `{NAME}`; sub-command lists show whole first paragraphs,
never cut mid-phrase with `...`; `build --torch` says a project's pin is its default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fdl.cli._registry import BUILTINS

TYPE_NAMES = re.compile(r"<(str|path|int|float|text)>|\{[A-Z_]+\}|\b(TEXT|INTEGER)\b")


def _groups() -> list[str]:
    return sorted(name for name, builtin in BUILTINS.items() if not builtin.single)


def _commands(run_fdl, group: str, cwd: Path) -> list[str]:
    text = run_fdl([group, "--help"], cwd=cwd).stdout
    listed = text.split("Commands:", 1)[1] if "Commands:" in text else ""
    return [
        line.split()[0]
        for line in listed.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    ]


@pytest.mark.parametrize("group", _groups())
def test_placeholders_and_lists_follow_one_style(run_fdl, group: str, tmp_path: Path) -> None:
    # outside a project: in fdl's own checkout `bench` is the project's command
    text = run_fdl([group, "--help"], cwd=tmp_path).stdout
    commands = _commands(run_fdl, group, tmp_path)
    assert commands, text  # the group's help lists its commands
    assert not re.search(r"\w\.\.\.\s*$", text, re.M), text  # a list entry cut mid-phrase
    for command in commands:
        shown = run_fdl([group, command, "--help"], cwd=tmp_path)
        assert shown.exit_code == 0, shown.output
        found = TYPE_NAMES.search(shown.stdout)
        assert found is None, f"fdl {group} {command} --help: {found.group(0)}\n{shown.stdout}"


def test_single_commands_follow_it_too(run_fdl) -> None:
    for args in (["init", "--help"], ["setup", "--help"], ["diagnose", "--help"]):
        shown = run_fdl(args)
        assert TYPE_NAMES.search(shown.stdout) is None, shown.stdout
    assert "Usage: fdl init [OPTIONS] NAME" in run_fdl(["init", "--help"]).stdout
    assert "--torch TORCH" in run_fdl(["setup", "--help"]).stdout


def test_build_torch_names_the_projects_pin_as_its_default(run_fdl) -> None:
    text = " ".join(run_fdl(["libtorch", "build", "--help"]).stdout.split())
    assert "default: the project's libtorch.torch, else the release its framework" in text
