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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl.cli._globals import GLOBAL_OPTIONS_HELP
from fdl.cli._registry import BUILTINS
from fdl.cli._session import Session

if TYPE_CHECKING:
    from fdl.manifest import Manifest
    from fdl.tasks import CommandSchema, OptionDecl

__all__ = ["Completion", "CompletionContext", "complete", "complete_words"]

FILES = ":files"
DIRS = ":dirs"
SHELLS = ("bash", "zsh", "fish")
_GLOBAL_VALUES = {"-e": "env", "--env": "env", "-f": "file", "--manifest": "file"}
_GLOBAL_VALUES.update({"-C": "dir", "--directory": "dir", "--set": "set"})


@dataclass
class Completion:
    """Candidates for the word being completed, or a request for file names."""

    candidates: list[tuple[str, str]] = field(default_factory=list)
    directive: str | None = None

    def add(self, value: str, description: str = "") -> None:
        self.candidates.append((value, description))


@dataclass
class CompletionContext:
    """What the words before the cursor said (global options, command)."""

    cwd: Path
    environ: dict[str, str]
    env: str | None = None
    manifest_file: Path | None = None
    rest: list[str] = field(default_factory=list)

    def manifest(self) -> Any:
        from fdl.manifest import discover, load_manifest
        from fdl.tasks import enclosing_manifest

        try:
            explicit = self.manifest_file
            if explicit is None:
                explicit = enclosing_manifest(discover(self.cwd).path)
            return load_manifest(self.cwd, manifest=explicit, env=self.env, environ=self.environ)
        except Exception:
            return None


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


def _first_word_environment(context: CompletionContext) -> None:
    """floDl's `fdl <env> <command>`: a first word that names an overlay and no command
    selects it (the clash of a command and an environment stays the command's here)."""
    if context.env is not None or not context.rest:
        return
    word = context.rest[0]
    if word in BUILTINS or word.startswith("-") or word not in _environments(context):
        return
    manifest = context.manifest()
    if manifest is not None and word in (manifest.data.get("commands") or {}):
        return
    context.env, context.rest = word, context.rest[1:]


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
        if context.env is None:
            commands = manifest.data.get("commands") or {}
            for env in _environments(context):
                if env not in BUILTINS and env not in commands:
                    result.add(env, f"environment overlay: fdl {env} <command>")


def complete_words(
    words: Sequence[str], cwd: Path, environ: dict[str, str], runner: Any = None
) -> Completion:
    """Completion for the command line ``fdl <words...>`` (the last word is being completed)."""
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
    _first_word_environment(context)
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


# --- after the command name: built-in groups and the project's commands ---------------

RUN_FLAGS = (
    ("--", "the script's arguments follow"),
    ("--dry-run", "print the command line and environment instead of running"),
    ("--help", "show what the command runs"),
    ("--no-append", "leave out `append:`"),
)
ENTRY_FLAGS = (
    ("--dry-run", "print the command line and environment instead of running"),
    ("--help", "show what the command runs"),
    ("--", "arguments passed on unchecked follow"),
)


def _click_command(name: str) -> Any:
    from importlib import import_module

    app = getattr(import_module(BUILTINS[name].module), "app", None)
    if app is None or not hasattr(app, "registered_commands"):
        return None
    import typer

    return typer.main.get_command(app)


def _choices(param: Any) -> list[str]:
    return [str(c) for c in getattr(param.type, "choices", None) or []]


def complete_builtin(
    name: str,
    args: list[str],
    current: str,
    result: Completion,
    environments: Callable[[], list[str]],
) -> None:
    """Sub-commands, options and choices of a built-in group (read from its typer app)."""
    node = _click_command(name)
    if node is None:
        return
    for word in args:
        commands = getattr(node, "commands", None)
        if commands and word in commands:
            node = commands[word]
    params = getattr(node, "params", [])
    options = [p for p in params if getattr(p, "param_type_name", "") == "option"]
    previous = args[-1] if args else ""
    for option in options:
        if previous in option.opts and not option.is_flag:
            if "--env" in option.opts:
                for env in environments():
                    result.add(env, "environment overlay")
            for choice in _choices(option):
                result.add(choice)
            if not result.candidates:
                result.directive = FILES
            return
    if current.startswith("-"):
        for option in options:
            for opt in [*option.opts, *option.secondary_opts]:
                result.add(opt, option.help or "")
        result.add("--help", "show the help")
        return
    commands = getattr(node, "commands", None)
    if commands:
        for sub, command in commands.items():
            if not getattr(command, "hidden", False):
                result.add(sub, (command.help or "").split("\n")[0])
        return
    for param in params:
        if getattr(param, "param_type_name", "") == "argument":
            for choice in _choices(param):
                result.add(choice)
    if not result.candidates:
        result.directive = FILES


def _option_values(option: OptionDecl, result: Completion, runner: Any) -> None:
    if option.choices:
        for choice in option.choices:
            result.add(str(choice))
    elif option.completer:
        from fdl.runner import default_runner

        try:
            done = (runner or default_runner()).run(
                ["sh", "-c", option.completer], check=False, timeout=3
            )
        except Exception:
            return
        for line in done.stdout.splitlines():
            if line.strip():
                result.add(line.strip())
    elif option.type in ("path", "list[path]"):
        result.directive = FILES


def _pending_option(schema: CommandSchema, words: list[str]) -> OptionDecl | None:
    if not words:
        return None
    previous = words[-1]
    option = None
    if previous.startswith("--") and "=" not in previous:
        option = schema.find(previous[2:])
    elif previous.startswith("-") and len(previous) == 2:
        option = schema.short(previous[1])
    return option if option is not None and not option.is_flag else None


def _entry_candidates(
    nested: Manifest,
    words: list[str],
    current: str,
    result: Completion,
    *,
    runner: Any,
    at_slot: bool,
) -> None:
    from fdl.tasks import CommandSchema, command_kind, schema_of

    # a tree schema (floDl 0.8's FdlArgs enum): the words after a sub-command are its
    subs, schema = CommandSchema.from_data(schema_of(nested)).sub_command(words)
    words = words[len(subs) :]
    at_slot = at_slot and not subs
    pending = _pending_option(schema, words)
    if pending is not None:
        _option_values(pending, result, runner)
        return
    if current.startswith("--") and "=" in current:
        option = schema.find(current[2:].split("=", 1)[0])
        if option is not None:
            inner = type(result)()
            _option_values(option, inner, runner)
            for value, text in inner.candidates:
                result.add(f"--{option.name}={value}", text)
            result.directive = inner.directive
        return
    if current.startswith("-"):
        for option in schema.options.values():
            result.add(f"--{option.name}", option.description)
            if option.short:
                result.add(f"-{option.short}", option.description)
        for flag, text in ENTRY_FLAGS:
            result.add(flag, text)
        return
    if at_slot:
        for name, spec in (nested.data.get("commands") or {}).items():
            kind = command_kind(spec)
            text = (spec or {}).get("description") or ("preset" if kind == "preset" else "")
            result.add(name, text)
    positionals = [w for w in words if not w.startswith("-")]
    if schema.commands and not positionals:
        from fdl._text import printable

        for name, child in schema.commands.items():
            result.add(name, printable(child.description))
    if schema.args:
        index = min(len(positionals), len(schema.args) - 1)
        arg = schema.args[index]
        if arg.choices:
            for choice in arg.choices:
                result.add(str(choice), arg.description)
    if not result.candidates:
        result.directive = FILES


def complete_project(
    context: CompletionContext,
    name: str,
    args: list[str],
    current: str,
    result: Completion,
    *,
    runner: Any = None,
) -> None:
    """Nested commands, presets, schema options and their choices of a manifest command."""
    from fdl.errors import FdlError
    from fdl.tasks import command_kind, load_nested

    manifest = context.manifest()
    commands = (manifest.data.get("commands") or {}) if manifest is not None else {}
    if manifest is None or name not in commands:
        return
    if "--" in args:
        result.directive = FILES
        return
    spec, directory, last = commands[name], manifest.directory, name
    enclosing: Manifest | None = None
    remaining = list(args)
    while True:
        kind = command_kind(spec)
        if kind == "run":
            if not current or current.startswith("-"):
                for flag, text in RUN_FLAGS:
                    result.add(flag, text)
            return
        if kind == "preset":
            if enclosing is not None:
                _entry_candidates(
                    enclosing, remaining, current, result, runner=runner, at_slot=False
                )
            return
        try:
            target = (spec or {}).get("path") or last
            nested = load_nested((directory / target).resolve(), context.env, manifest.directory)
        except FdlError:
            return
        if nested is None:
            return
        children = nested.data.get("commands") or {}
        if remaining and remaining[0] in children:
            last = remaining.pop(0)
            spec, directory, enclosing = children[last], nested.directory, nested
            continue
        _entry_candidates(nested, remaining, current, result, runner=runner, at_slot=not remaining)
        return
