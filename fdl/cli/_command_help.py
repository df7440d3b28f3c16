"""``fdl <command> --help``: what a manifest command runs, resolved.

Shows the script with placeholders for the arguments, where it runs (this
machine or a compose service, with the exact ``docker compose`` line), the
environment it gets, and for nested manifests their presets, sub-commands,
arguments and options.
"""

from __future__ import annotations

from typing import Any

from fdl._text import printable
from fdl.cli._session import Session
from fdl.tasks import (
    CommandPlan,
    CommandSchema,
    Invocation,
    Kind,
    OptionDecl,
    command_kind,
    format_value,
    preset_problems,
    render_argv,
)

__all__ = ["render_command_help"]

_PLACEHOLDERS = {"int": "N", "float": "X", "path": "PATH", "bool": ""}


def _rows(rows: list[tuple[str, str]], indent: int = 2) -> list[str]:
    from fdl.manifest import shown_text  # a token-shaped description masked

    width = max((len(left) for left, _ in rows), default=0) + 2
    return [f"{' ' * indent}{left:<{width}}{shown_text(right)}".rstrip() for left, right in rows]


def _title(invocation: Invocation, subs: list[str], shown: CommandSchema) -> str:
    resolution = invocation.resolution
    if subs:  # the description came from the program's --fdl-schema: printed as text
        about = printable(shown.description) if shown.description else ""
        return f"fdl {resolution.name} {' '.join(subs)}" + (f" - {about}" if about else "")
    plan = invocation.plan
    description = plan.description if plan is not None else None
    if description is None and resolution.nested is not None:
        description = resolution.nested.data.get("description")
    if description is None:
        description = resolution.spec.get("description")
    if description is None and shown.description:
        description = printable(shown.description)
    from fdl.manifest import shown_text

    return f"fdl {resolution.name}" + (f" - {shown_text(description)}" if description else "")


def _entry_commands(schema: CommandSchema, base: str) -> list[str]:
    """The program's own sub-commands (a tree --fdl-schema), as floDl 0.8.0 lists them
    (run.rs:1176-1203)."""
    if not schema.commands:
        return []
    rows = [(name, printable(child.description) or "-") for name, child in schema.commands.items()]
    return [
        "",
        "Sub-commands (of the program):",
        *_rows(rows),
        f"  Run `{base} <sub-command> --help` for a sub-command's options.",
    ]


def _option_label(option: OptionDecl) -> str:
    short = f"-{option.short}, " if option.short else "    "
    placeholder = _PLACEHOLDERS.get(option.type.removeprefix("list[").removesuffix("]"), "VALUE")
    if option.is_list and placeholder:
        placeholder += ",..."
    return f"{short}--{option.name}" + (f" {placeholder}" if placeholder else "")


def _option_text(option: OptionDecl) -> str:
    parts = [option.description or ""]
    if option.default is not None and option.default is not False and option.default != []:
        parts.append(f"[default: {format_value(option.default)}]")
    if option.choices:
        parts.append(f"[choices: {', '.join(format_value(c) for c in option.choices)}]")
    if option.env:
        parts.append(f"[env: {option.env}]")
    return " ".join(p for p in parts if p)


def _schema_sections(schema: CommandSchema) -> list[str]:
    lines: list[str] = []
    if schema.args:
        rows = []
        for arg in schema.args:
            label = f"<{arg.name}>" + ("..." if arg.variadic else "")
            text = arg.description or ""
            if not arg.required:
                text += " (optional)"
            if arg.choices:
                text += f" [choices: {', '.join(format_value(c) for c in arg.choices)}]"
            rows.append((label, text.strip()))
        lines += ["", "Arguments:", *_rows(rows)]
    if schema.options:
        rows = [(_option_label(o), _option_text(o)) for o in schema.options.values()]
        lines += ["", "Options:", *_rows(rows)]
        if not schema.strict:
            lines.append("  (other options are passed on to the entry unchecked)")
    return lines


def _children(invocation: Invocation) -> list[str]:
    nested = invocation.resolution.nested
    commands: dict[str, Any] = (nested.data.get("commands") or {}) if nested else {}
    presets, others = [], []
    for name, spec in commands.items():
        kind = command_kind(spec)
        text = (spec or {}).get("description") or ""
        if kind == "preset":
            presets.append((name, text))
        else:
            others.append((name, text or ((spec or {}).get("run") or "(nested commands)")))
    lines: list[str] = []
    if presets:
        lines += ["", "Presets:", *_rows(presets)]
    if others:
        lines += ["", "Commands:", *_rows(others)]
    return lines


def _usage(invocation: Invocation, schema: CommandSchema, subs: list[str]) -> str:
    resolution = invocation.resolution
    base = " ".join(["fdl", resolution.name, *subs])
    if resolution.kind is Kind.RUN:
        return f"{base} [--dry-run] [--no-append] [-- ARGS... [-- RUNNER-ARGS...]]"
    nested = resolution.nested
    commands = (nested.data.get("commands") or {}) if nested else {}
    slots = []
    if resolution.kind is not Kind.PRESET and commands:
        has_presets = any(command_kind(s) == "preset" for s in commands.values())
        has_commands = any(command_kind(s) != "preset" for s in commands.values())
        arg_name = (nested.data.get("arg-name") if nested else None) or "preset"
        names = [f"<{arg_name}>"] * has_presets + ["<command>"] * has_commands
        slots.append(f"[{'|'.join(names)}]")
    if resolution.kind is Kind.GROUP:
        return f"{base} {' '.join(slots)}".rstrip()
    if schema.commands:
        slots.append("<sub-command>")
    slots.append("[--dry-run] [OPTIONS]")
    for arg in schema.args:
        label = f"<{arg.name}>" + ("..." if arg.variadic else "")
        slots.append(label if arg.required else f"[{label}]")
    slots.append("[-- ARGS...]")
    return f"{base} {' '.join(slots)}"


def _placement(plan: CommandPlan, session: Session) -> list[str]:
    if plan.docker is not None:
        where = (
            f"Runs in docker compose service {plan.docker.service} "
            f"({plan.docker.compose_file.name}), in {plan.docker.container_dir}:"
        )
    else:
        where = f"Runs on this machine, in {plan.cwd}:"
    lines = ["", where, *(f"  {line}" for line in plan.script.splitlines())]
    if plan.docker is not None:
        lines += ["", "Command line:", *(f"  {line}" for line in render_argv(plan).splitlines())]
    if plan.docker is None and plan.env:
        lines += ["", "Environment:", *(f"  {change.describe()}" for change in plan.env)]
    if plan.docker is not None and plan.env:
        lines += ["", "Compose variables (for the compose file):"]
        lines += [f"  {c.describe()}" for c in plan.env]
    overlay = plan.overlay or session.env
    if overlay:
        lines += ["", f"Environment overlay: {overlay}"]
    return lines


def _run_notes(invocation: Invocation) -> list[str]:
    spec = invocation.resolution.spec
    append = spec.get("append")
    lines = [
        "",
        "Arguments after `--` reach the script unchanged (each quoted for the shell);",
        "a second `--` splits them into ARGS and RUNNER-ARGS.",
    ]
    if append:
        lines.append(f"--no-append leaves out `append: {append}`.")
    return lines


def _preset_settings(invocation: Invocation) -> list[str]:
    spec = invocation.resolution.spec
    rows = []
    for section, values in spec.items():
        if isinstance(values, dict) and section != "description":
            rows += [(f"{section}.{key}", format_value(value)) for key, value in values.items()]
    return ["", "Preset settings:", *_rows(rows)] if rows else []


def _problems(invocation: Invocation, session: Session) -> list[str]:
    """Presets whose values do not fit the schema: they are refused when they run."""
    resolution = invocation.resolution
    nested = resolution.nested
    if nested is None:
        return []
    problems = preset_problems(nested, session.discover().directory)
    if resolution.kind is Kind.PRESET:
        problems = {k: v for k, v in problems.items() if k == resolution.words[-1]}
    if not problems:
        return []
    lines = ["", "Problems (these presets are refused until fixed; the rest works):"]
    for errors in problems.values():
        for error in errors:
            lines.append(f"  {error}")
            if error.hint:
                lines.append(f"    fix: {error.hint}")
    return lines


def render_command_help(invocation: Invocation, session: Session) -> str:
    """The help text of a resolved manifest command."""
    resolution = invocation.resolution
    nested = resolution.nested
    schema = CommandSchema.from_data(nested.data.get("schema") if nested else None)
    # `fdl <command> <sub-command> --help`: the sub-command's own schema (a tree schema)
    subs, shown = (
        schema.sub_command(resolution.args) if resolution.kind is Kind.ENTRY else ([], schema)
    )
    lines = [_title(invocation, subs, shown), "", f"Usage: {_usage(invocation, shown, subs)}"]
    if resolution.kind is not Kind.PRESET and not subs:
        lines += _children(invocation)
    if resolution.kind is Kind.PRESET:
        lines += _preset_settings(invocation)
    if resolution.kind is not Kind.RUN:
        lines += _entry_commands(shown, " ".join(["fdl", resolution.name, *subs]))
        # a probed schema's descriptions, defaults and choices are the program's text
        lines += [printable(line, limit=4000) for line in _schema_sections(shown)]
    lines += _problems(invocation, session)
    plan = invocation.plan
    if plan is not None:
        lines += _placement(plan, session)
        if plan.declared_at is not None:
            lines += ["", f"Declared at {plan.declared_at}."]
    if resolution.kind is Kind.RUN:
        lines += _run_notes(invocation)
    elif resolution.kind is not Kind.GROUP:
        lines += [
            "",
            "Options and arguments before `--` are checked against the schema;",
            "everything after `--` is passed on unchecked.",
        ]
    if resolution.kind is Kind.GROUP:
        lines += ["", f"Run `fdl {resolution.name} <command> --help` for a command."]
    else:
        lines.append(
            "--dry-run prints the exact command line and environment instead of running it."
        )
    notes = plan.notes if plan is not None else tuple(resolution.notes)
    if notes:
        lines += ["", *(f"note: {note}" for note in notes)]
    lines += ["", f"Example: {_example(invocation)}"]
    return "\n".join(lines) + "\n"


def _example(invocation: Invocation) -> str:
    resolution = invocation.resolution
    base = f"fdl {resolution.name}"
    if resolution.kind is Kind.RUN:
        return f"{base} -- --verbose"
    if resolution.kind is Kind.GROUP:
        commands = list((resolution.nested.data.get("commands") or {}) if resolution.nested else {})
        return f"{base} {commands[0]}" if commands else base
    return f"{base} --dry-run"
