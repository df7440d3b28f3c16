"""Checking a user's arguments against a nested manifest's ``schema:`` before anything starts.

The arguments are passed on exactly as typed (the entry parses them itself);
fdl only rejects what the schema says cannot work: unknown flags (when the
schema is strict; otherwise a near miss gets a did-you-mean note), values
outside ``choices``, values of the wrong type, missing arguments. Options not
given fall back to their ``env:`` variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fdl._text import did_you_mean
from fdl.errors import UsageError
from fdl.manifest.sections import choice_matches, convert, item_type

__all__ = ["ArgDecl", "CheckedArgs", "CommandSchema", "OptionDecl", "check_args"]

_NUMBER = re.compile(r"-(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


@dataclass(frozen=True)
class _Declared:
    """What an option and a positional argument both declare."""

    name: str
    type: str = "string"
    description: str = ""
    default: Any = None
    choices: tuple[Any, ...] | None = None
    completer: str | None = None


def _declared(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of :class:`_Declared` but the name, from a declaration's data."""
    return {
        "type": spec.get("type") or "string",
        "description": spec.get("description") or "",
        "default": spec.get("default"),
        "choices": tuple(spec["choices"]) if spec.get("choices") is not None else None,
        "completer": spec.get("completer"),
    }


@dataclass(frozen=True)
class OptionDecl(_Declared):
    """An option declared in ``schema.options``."""

    short: str | None = None
    env: str | None = None

    @property
    def is_flag(self) -> bool:
        return self.type == "bool"

    @property
    def is_list(self) -> bool:
        return self.type.startswith("list[")


@dataclass(frozen=True)
class ArgDecl(_Declared):
    """A positional argument declared in ``schema.args``."""

    required: bool = True
    variadic: bool = False


@dataclass(frozen=True)
class CommandSchema:
    """The entry's interface, from a nested manifest's ``schema:``."""

    options: dict[str, OptionDecl] = field(default_factory=dict)
    args: tuple[ArgDecl, ...] = ()
    strict: bool = False
    description: str = ""
    # floDl 0.8's tree schema (an FdlArgs enum): sub-command name -> its own schema.
    commands: dict[str, CommandSchema] = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> CommandSchema:
        """Build from validated manifest data (``schema:`` value)."""
        if not data:
            return cls()
        options = {
            name: OptionDecl(
                name=name, short=spec.get("short"), env=spec.get("env"), **_declared(spec)
            )
            for name, spec in (data.get("options") or {}).items()
            if isinstance(spec, Mapping)
        }
        args = tuple(
            ArgDecl(
                name=spec["name"],
                required=spec["required"]
                if spec.get("required") is not None
                else "default" not in spec,
                variadic=bool(spec.get("variadic")),
                **_declared(spec),
            )
            for spec in (data.get("args") or [])
            if isinstance(spec, Mapping)
        )
        commands = {
            str(name): cls.from_data(child)
            for name, child in (data.get("commands") or {}).items()
            if isinstance(child, Mapping) or child is None
        }
        description = data.get("description")
        return cls(
            options,
            args,
            bool(data.get("strict")),
            description if isinstance(description, str) else "",
            commands,
        )

    def sub_command(self, tokens: Sequence[str]) -> tuple[list[str], CommandSchema]:
        """The sub-commands named at the front of ``tokens`` (``train``, ``train
        subscan``) and the schema that applies after them."""
        names: list[str] = []
        schema = self
        for token in tokens:
            child = schema.commands.get(token)
            if child is None:
                break
            names.append(token)
            schema = child
        return names, schema

    def find(self, name: str) -> OptionDecl | None:
        """The option ``--name`` (``_`` and ``-`` are interchangeable)."""
        return self.options.get(name) or self.options.get(name.replace("_", "-"))

    def short(self, letter: str) -> OptionDecl | None:
        """The option whose short is ``-letter``."""
        return next((o for o in self.options.values() if o.short == letter), None)


@dataclass
class CheckedArgs:
    """The result of :func:`check_args`.

    Attributes:
        words: The arguments to pass (as typed, plus ``env:`` fallbacks).
        notes: Things the user should know (near-miss unknown flags).
    """

    words: list[str]
    notes: list[str] = field(default_factory=list)


def _is_value(token: str) -> bool:
    return not token.startswith("-") or token == "-" or bool(_NUMBER.fullmatch(token))


@dataclass
class _Parser:
    schema: CommandSchema
    command: str
    tokens: list[str]
    index: int = 0
    given: set[str] = field(default_factory=set)
    positionals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, message: str) -> UsageError:
        return UsageError(message, hint=f"see `fdl {self.command} --help`")

    def check_value(self, option: OptionDecl, value: str, shown: str) -> None:
        items = [v for v in value.split(",") if v] if option.is_list else [value]
        for item in items:
            try:
                convert(item_type(option.type), item)
            except ValueError as exc:
                raise self.fail(f"{shown}: {exc}") from None
            if option.choices is not None and not choice_matches(item, list(option.choices)):
                allowed = ", ".join(str(c) for c in option.choices)
                raise self.fail(f"invalid value {item!r} for {shown}; allowed: {allowed}")

    def take_value(self, option: OptionDecl, inline: str | None, shown: str) -> None:
        if inline is None:
            nxt = self.tokens[self.index] if self.index < len(self.tokens) else None
            if nxt is None or not _is_value(nxt):
                if option.default is not None:
                    return  # bare, as floDl's parser takes it: the program uses its default
                raise self.fail(f"{shown} needs a value ({option.type})")
            inline = nxt
            self.index += 1
        self.check_value(option, inline, shown)

    def unknown(self, token: str, known: list[str]) -> None:
        close = did_you_mean(token.split("=", 1)[0], known)
        if self.schema.strict:
            extra = f"; did you mean {close}?" if close else ""
            raise self.fail(f"unknown option {token.split('=', 1)[0]} for `{self.command}`{extra}")
        if close:
            self.notes.append(
                f"{token.split('=', 1)[0]} is not declared by `{self.command}` "
                f"(did you mean {close}?); passing it on as typed"
            )
        # An undeclared option may take a value: do not count it as a positional.
        following = self.tokens[self.index] if self.index < len(self.tokens) else "-"
        if "=" not in token and not following.startswith("-"):
            self.index += 1

    def long(self, token: str) -> None:
        name, eq, inline = token[2:].partition("=")
        option = self.schema.find(name)
        if option is None:
            self.unknown(token, [f"--{n}" for n in self.schema.options])
            return
        self.given.add(option.name)
        if option.is_flag:
            if eq:
                raise self.fail(f"--{name} is a switch and takes no value (got {token!r})")
            return
        self.take_value(option, inline if eq else None, f"--{name}")

    def short(self, token: str) -> None:
        letters = token[1:]
        for position, letter in enumerate(letters):
            option = self.schema.short(letter)
            if option is None:
                self.unknown(
                    f"-{letter}", [f"-{o.short}" for o in self.schema.options.values() if o.short]
                )
                return
            self.given.add(option.name)
            if option.is_flag:
                continue
            rest = letters[position + 1 :]
            inline = rest[1:] if rest.startswith("=") else rest
            self.take_value(option, inline or None, f"-{letter}")
            return

    def run(self) -> None:
        while self.index < len(self.tokens):
            token = self.tokens[self.index]
            self.index += 1
            if token.startswith("--") and len(token) > 2:
                self.long(token)
            elif token.startswith("-") and not _is_value(token):
                self.short(token)
            else:
                self.positionals.append(token)
        self.check_positionals()

    def check_positionals(self) -> None:
        decls = list(self.schema.args)
        values = list(self.positionals)
        for decl in decls:
            count = len(values) if decl.variadic else min(1, len(values))
            taken, values = values[:count], values[count:]
            if not taken and decl.required:
                raise self.fail(f"missing argument <{decl.name}>")
            for value in taken:
                self.check_positional(decl, value)
        if values and decls and self.schema.strict:
            raise self.fail(f"unexpected argument {values[0]!r}")

    def check_positional(self, decl: ArgDecl, value: str) -> None:
        try:
            convert(decl.type, value)
        except ValueError as exc:
            raise self.fail(f"<{decl.name}>: {exc}") from None
        if decl.choices is not None and not choice_matches(value, list(decl.choices)):
            allowed = ", ".join(str(c) for c in decl.choices)
            raise self.fail(f"invalid value {value!r} for <{decl.name}>; allowed: {allowed}")


def check_args(
    schema: CommandSchema,
    tokens: Sequence[str],
    *,
    command: str,
    environ: Mapping[str, str],
    preset_options: Sequence[str] = (),
) -> CheckedArgs:
    """Validate ``tokens`` against ``schema``; add ``env:`` fallbacks for options not given.

    Args:
        schema: The entry's schema.
        tokens: The user's arguments (before any ``--``).
        command: The qualified command name, for messages.
        environ: Environment for ``env:`` fallbacks.
        preset_options: Options the preset or manifest already passes (no fallback for them).

    Raises:
        UsageError: an argument the schema rejects.
    """
    if schema.commands:
        return _check_sub_command(schema, tokens, command=command, environ=environ)
    parser = _Parser(schema, command, list(tokens))
    parser.run()
    words = list(tokens)
    preset = {name.replace("_", "-") for name in preset_options}
    for option in schema.options.values():
        if not option.env or option.name in parser.given or option.name.replace("_", "-") in preset:
            continue
        value = environ.get(option.env)
        if not value:
            continue
        if option.is_flag:
            if value.lower() in ("1", "true", "yes"):
                words.append(f"--{option.name}")
            continue
        parser.check_value(option, value, f"--{option.name} (from ${option.env})")
        words.extend([f"--{option.name}", value])
    return CheckedArgs(words, parser.notes)


def _check_sub_command(
    schema: CommandSchema, tokens: Sequence[str], *, command: str, environ: Mapping[str, str]
) -> CheckedArgs:
    """A tree schema, as floDl 0.8.0 checks it (config/validation.rs:112-135): the first word
    names the sub-command and the rest is checked against its schema. Nothing typed, or a
    flag first, is left to the program (a flag's value could pass for a sub-command)."""
    if not tokens or tokens[0].startswith("-"):
        return CheckedArgs(list(tokens))
    child = schema.commands.get(tokens[0])
    if child is None:
        names = list(schema.commands)
        close = did_you_mean(tokens[0], names)
        raise UsageError(
            f"`{tokens[0]}` is not a sub-command of `fdl {command}`",
            hint=f"did you mean `fdl {command} {close}`?"
            if close
            else f"its sub-commands: {', '.join(names)} (see `fdl {command} --help`)",
        )
    checked = check_args(child, tokens[1:], command=f"{command} {tokens[0]}", environ=environ)
    return CheckedArgs([tokens[0], *checked.words], checked.notes)
