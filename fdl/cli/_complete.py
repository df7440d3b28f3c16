"""Shell completion, computed by fdl itself at completion time.

The scripts printed by ``fdl completions <shell>`` call the hidden command
``fdl __complete <shell> -- <words...>`` (the words after ``fdl``, the last
one being completed). It answers one candidate per line as
``value<TAB>description``, or the single line ``:files`` / ``:dirs`` to ask
the shell for file names. Because it reads the manifest (with the selected
environment) on every request, nested commands, presets and option choices
are always current.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fdl.cli._candidates import Completion, CompletionContext
from fdl.cli._globals import GLOBAL_OPTIONS_HELP
from fdl.cli._registry import BUILTINS
from fdl.cli._session import Session

__all__ = ["Completion", "complete", "complete_words"]

FILES = ":files"
DIRS = ":dirs"
SHELLS = ("bash", "zsh", "fish")
_GLOBAL_VALUES = {"-e": "env", "--env": "env", "-f": "file", "--manifest": "file"}
_GLOBAL_VALUES.update({"-C": "dir", "--directory": "dir", "--set": "set"})


def _global_options() -> list[tuple[str, str]]:
    out = []
    for label, text in GLOBAL_OPTIONS_HELP:
        for part in label.split(","):
            word = part.strip().split(" ")[0]
            if word.startswith("-"):
                out.append((word, text))
    return out


def _parse_globals(words: list[str], context: CompletionContext) -> str | None:
    """Consume global options from ``words``; return the pending value kind, if any."""
    index = 0
    while index < len(words):
        word = words[index]
        if word in _GLOBAL_VALUES:
            if index + 1 >= len(words):
                return _GLOBAL_VALUES[word]
            value = words[index + 1]
            if _GLOBAL_VALUES[word] == "env":
                context.env = value
            elif _GLOBAL_VALUES[word] == "file":
                context.manifest_file = Path(value)
            elif _GLOBAL_VALUES[word] == "dir":
                context.cwd = (context.cwd / value).resolve()
            index += 2
            continue
        if word.startswith("@") and len(word) > 1:
            context.env = word[1:]
        elif not word.startswith("-") or word == "-":
            context.rest = words[index:]
            return None
        index += 1
    return None


def _environments(context: CompletionContext) -> list[str]:
    manifest = context.manifest()
    return manifest.environments() if manifest is not None else []


def _top_level(current: str, context: CompletionContext, result: Completion) -> None:
    if current.startswith("@"):
        for env in _environments(context):
            result.add(f"@{env}", "environment overlay")
        return
    if current.startswith("-"):
        for word, text in _global_options():
            result.add(word, text)
        return
    for builtin in BUILTINS.values():
        result.add(builtin.name, builtin.summary)
    manifest = context.manifest()
    if manifest is not None:
        from fdl.cli._project_list import command_rows

        for name, text in command_rows(manifest, context.env):
            if name not in BUILTINS:
                result.add(name, text)


def complete_words(
    words: Sequence[str], cwd: Path, environ: dict[str, str], runner: Any = None
) -> Completion:
    """Completion for the command line ``fdl <words...>`` (the last word is being completed)."""
    from fdl.cli._complete_commands import complete_builtin, complete_project

    result = Completion()
    words = list(words) or [""]
    current, before = words[-1], words[:-1]
    context = CompletionContext(cwd, environ, env=environ.get("FDL_ENV") or None)
    pending = _parse_globals(before, context)
    if pending is not None:
        if pending == "env":
            for env in _environments(context):
                result.add(env, "environment overlay")
        elif pending in ("file", "dir"):
            result.directive = FILES if pending == "file" else DIRS
        return result
    if not context.rest:
        _top_level(current, context, result)
        return result
    name, args = context.rest[0], context.rest[1:]
    if name in BUILTINS and name != "run":
        complete_builtin(name, args, current, result, lambda: _environments(context))
        return result
    if name == "run":
        manifest = context.manifest()
        commands = (manifest.data.get("commands") or {}) if manifest is not None else {}
        if not args and not current.startswith("-"):
            for command, text in _project_rows(context):
                result.add(command, text)
            return result
        if args and args[0] in commands:
            name, args = args[0], args[1:]
    complete_project(context, name, args, current, result, runner=runner)
    return result


def _project_rows(context: CompletionContext) -> list[tuple[str, str]]:
    manifest = context.manifest()
    if manifest is None:
        return []
    from fdl.cli._project_list import command_rows

    return command_rows(manifest, context.env)


def _merge_equals(words: list[str]) -> list[str]:
    """bash splits ``--opt=val`` into ``--opt``, ``=``, ``val``: join them back."""
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "=" and out:
            nxt = words[index + 1] if index + 1 < len(words) else ""
            out[-1] = f"{out[-1]}={nxt}"
            index += 2
            continue
        out.append(word)
        index += 1
    return out


def complete(session: Session, args: list[str]) -> int:
    """``fdl __complete <shell> -- <words...>``: print candidates for the shell's script."""
    shell = args[0] if args and args[0] in SHELLS else "bash"
    rest = args[1:] if args and args[0] in SHELLS else list(args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    after_equals = shell == "bash" and rest[-1:] == ["="]
    if shell == "bash":
        rest = _merge_equals(rest)
    result = complete_words(rest, session.cwd, dict(session.environ))
    current = rest[-1] if rest else ""
    if result.directive is not None and not result.candidates:
        session.console.out(result.directive)
        return 0
    seen: set[str] = set()
    for value, text in result.candidates:
        if not value.startswith(current) or value in seen:
            continue
        seen.add(value)
        shown = value
        if shell == "bash" and "=" in current and value.startswith("-"):
            # bash completes only the part after `=` (COMP_WORDBREAKS)
            shown = ("=" if after_equals else "") + value.split("=", 1)[1]
        description = " ".join(text.split())
        session.console.out(f"{shown}\t{description}" if description and shell != "bash" else shown)
    return 0
