"""Every fix fdl prints names a command that exists: each `fdl ...` written in fdl's
sources between backquotes, or as a hint's text, is parsed with fdl's own CLI (the
group, the sub-command, its options and arguments). `fdl libtorch install cu126`, once
a deploy hint, exits 2."""

from __future__ import annotations

import re
import shlex
from importlib import import_module
from pathlib import Path

import pytest
import typer

from fdl.cli._registry import BUILTINS

SOURCES = Path(__file__).resolve().parents[2] / "fdl"

# `fdl ...` between backquotes, or a hint string that starts with the command.
_QUOTED = re.compile(r"(?<!`)(`{1,2})(fdl [^`\n]+)\1(?!`)")
_HINT = re.compile(r"""hint=f?["'](?:e\.g\. |run |try )?(fdl [^"'\n;]+)""")
# Placeholders of f-strings and prose stand-ins: an argument or a value the user picks.
_SHELL = re.compile(r"<shell>|\bSHELL\b")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}|<[^<>]*>|\bNAME\b|\bFILE(?:\.whl)?\b|\bDIR\b|\bTARGET\b")


def _commands() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in sorted(SOURCES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for pattern in (_QUOTED, _HINT):
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(
                    (
                        f"{path.relative_to(SOURCES.parent)}:{line}",
                        match.group(2 if pattern is _QUOTED else 1),
                    )
                )
    return found


def _words(command: str) -> list[str] | None:
    text = _SHELL.sub("bash", command.split(" (", maxsplit=1)[0])
    text = _PLACEHOLDER.sub("x", text).strip().rstrip(".,:")
    if "..." in text or "|" in text or "[" in text or re.search(r"\s--?[\w-]+\{", command):
        return None  # alternatives, elisions or an option named by a placeholder: for people
    try:
        return shlex.split(text)[1:]
    except ValueError:
        return None


# What a command refuses after click has parsed it (exit 2 all the same): each needs
# one of these options.
_NEEDS_ONE_OF = {("libtorch", "install"): ("--from-wheel", "--from-dir", "--from-registry")}


def _parse(words: list[str]) -> None:
    """Resolve the group and sub-command and parse the rest as click would."""
    if not words or words[0].startswith("-") or words[0] not in BUILTINS:
        return  # `fdl --help`, `fdl @env ...`, or a project command
    module = import_module(BUILTINS[words[0]].module)
    if not isinstance(module.app, typer.Typer):
        return  # `fdl run`: takes its arguments unparsed
    # typer carries its own copy of click: its classes, not click's, are duck-typed here.
    command = typer.main.get_command(module.app)
    rest = words[1:]
    while hasattr(command, "get_command") and rest and not rest[0].startswith("-"):
        found = command.get_command(command.context_class(command), rest[0])
        assert found is not None, f"no command `{rest[0]}` in fdl {words[0]}"
        command, rest = found, rest[1:]
    if hasattr(command, "get_command") and not rest:
        return  # `fdl libtorch`: the group's help
    command.make_context(f"fdl {words[0]}", list(rest), resilient_parsing=False)
    needed = _NEEDS_ONE_OF.get(tuple(words[:2]), ())
    assert not needed or set(needed) & set(rest), f"it needs one of {', '.join(needed)}"


COMMANDS = _commands()


def test_the_scan_finds_the_hints() -> None:
    texts = [command for _, command in COMMANDS]
    assert len(texts) > 50
    assert any(text.startswith("fdl libtorch build --archs") for text in texts)


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_command_a_fix_names_parses(where: str, command: str) -> None:
    words = _words(command)
    if words is None:
        pytest.skip(f"not a runnable form: {command}")
    try:
        _parse(words)
    except Exception as exc:
        if type(exc).__name__ == "Exit" and getattr(exc, "exit_code", None) == 0:
            return  # `--help`: parsed, and answered
        if not hasattr(exc, "format_message") and not isinstance(exc, AssertionError):
            raise
        if type(exc).__name__ == "MissingParameter" or "requires an argument" in str(exc):
            # prose naming a command or an option (`fdl init`, `--archs`): it exists
            return
        pytest.fail(f"{where}: `{command}` does not parse: {exc}", pytrace=False)
