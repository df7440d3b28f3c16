"""Completion after the command name: built-in groups and the project's commands."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from fdl.cli._registry import BUILTINS

if TYPE_CHECKING:
    from fdl.cli._candidates import Completion, CompletionContext
    from fdl.manifest import Manifest
    from fdl.tasks import CommandSchema, OptionDecl

__all__ = ["complete_builtin", "complete_project"]

FILES = ":files"
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

    schema = CommandSchema.from_data(schema_of(nested))
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
