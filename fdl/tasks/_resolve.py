"""Walking from ``fdl <name> <args...>`` through nested manifests to the command to run.

``fdl sub quick --epochs 3`` reads the root manifest's ``sub`` (a nested
manifest in ``sub/``), finds its command ``quick`` (a preset), and resolves
to "run ``sub``'s entry with ``quick``'s settings and ``--epochs 3``".
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from fdl._text import did_you_mean
from fdl.errors import Location, ManifestError, ManifestErrors, UsageError
from fdl.manifest import Manifest, MapNode, Origin, display_name
from fdl.tasks._nested import command_kind, load_nested, preset_problems

TYPE_CHECKING = False  # typing costs start-up: annotations only
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Kind",
    "Resolution",
    "locate",
    "resolve",
]

HELP_FLAGS = ("--help", "-h")
DRY_RUN = "--dry-run"
REFRESH_SCHEMA = "--refresh-schema"
NO_APPEND = "--no-append"


class Kind(str, Enum):
    """What a resolved command is."""

    RUN = "run"  # an inline `run:` script
    ENTRY = "entry"  # a nested manifest's entry with the user's arguments
    PRESET = "preset"  # the enclosing entry with a preset's settings
    GROUP = "group"  # a nested manifest without entry: only help to show


@dataclass
class Resolution:
    """The command ``fdl <words...>`` names, and what the user asked of it.

    Attributes:
        kind: Run script, entry, preset, or a group (help only).
        words: The command words (``("sub", "quick")``).
        spec: The command's manifest entry (``run:`` commands and presets).
        manifest: The manifest that declares the command.
        key: The command's key path in that manifest.
        directory: Where the command runs (the declaring manifest's directory).
        nested: The nested manifest whose entry runs (entry, preset, group).
        help: ``--help``/``-h`` was given (before ``--``).
        dry_run: ``--dry-run`` was given.
        no_append: ``--no-append`` was given (``run:`` commands).
        args: The user's arguments before ``--`` (entry and preset) or after it (run).
        passthrough: Arguments after ``--`` for entries (passed on unchecked).
        notes: Remarks for the user (not errors).
        cluster: The command is marked ``cluster: true`` (floDl's launcher mode).
        cluster_at: Where that mark is.
    """

    kind: Kind
    words: tuple[str, ...]
    spec: dict[str, Any]
    manifest: Manifest
    key: tuple[str, ...]
    directory: Path
    nested: Manifest | None = None
    help: bool = False
    dry_run: bool = False
    no_append: bool = False
    refresh_schema: bool = False
    cluster: bool = False
    cluster_at: Location | None = None
    args: list[str] = field(default_factory=list)
    passthrough: list[str] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join(self.words)


def locate(
    manifest: Manifest, key: Sequence[str], root: Path, *, at_key: bool = False
) -> Location | None:
    """Where ``key`` is written in ``manifest``, named relative to the project ``root``.

    With ``at_key``, the position of the key itself (``test:``) rather than its value.
    """
    path = tuple(key)
    parent = manifest.node(path[:-1]) if at_key and path else None
    if isinstance(parent, MapNode) and path[-1] in parent.entries:
        origin: Origin | None = parent.key_origin(path[-1])
    else:
        origin = manifest.origin(path)
    if origin is None:
        return None
    location = origin.location()
    if location.path is None:
        return location
    return Location(
        display_name(location.path, root), location.line, location.column, location.path
    )


@dataclass
class _Flags:
    help: bool = False
    dry_run: bool = False
    no_append: bool = False
    refresh_schema: bool = False
    before: list[str] = field(default_factory=list)
    after: list[str] | None = None


def _split_flags(tail: Sequence[str], *, run_kind: bool) -> _Flags:
    """fdl's own flags come before the first ``--``; the rest belongs to the command."""
    flags = _Flags()
    tokens = list(tail)
    if "--" in tokens:
        cut = tokens.index("--")
        tokens, flags.after = tokens[:cut], tokens[cut + 1 :]
    for token in tokens:
        if token in HELP_FLAGS:
            flags.help = True
        elif token == DRY_RUN:
            flags.dry_run = True
        elif token == NO_APPEND and run_kind:
            flags.no_append = True
        elif token == REFRESH_SCHEMA and not run_kind:
            flags.refresh_schema = True
        else:
            flags.before.append(token)
    return flags


# fdl's global options (fdl.cli._globals), which a user may type after the command name
# (`fdl train -e ci`): the fix moves them before it rather than handing them to the script.
_GLOBAL_VALUE_OPTIONS = {"-e", "--env", "-f", "--manifest", "-C", "--directory", "--set"}
_GLOBAL_FLAGS = {"-v", "-vv", "-vvv", "--verbose", "-q", "--quiet", "--no-color", "--no-ansi"}


def _split_globals(tokens: Sequence[str]) -> tuple[list[str], list[str]]:
    """``tokens`` as (fdl's global options, the rest)."""
    found: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        name = token.split("=", 1)[0]
        if token in _GLOBAL_VALUE_OPTIONS and index + 1 < len(tokens):
            found += tokens[index : index + 2]
            index += 2
            continue
        if (
            token in _GLOBAL_FLAGS
            or (token.startswith("@") and len(token) > 1)
            or (name in _GLOBAL_VALUE_OPTIONS and name.startswith("--") and "=" in token)
        ):
            found.append(token)
        else:
            rest.append(token)
        index += 1
    return found, rest


def _misplaced(name: str, before: list[str], after: list[str] | None) -> UsageError:
    """Arguments of a ``run:`` command before ``--``, with the form that means what the
    user most likely meant: fdl's own options before the command, the rest after ``--``."""
    after = after or []
    found, rest = _split_globals(before)
    tail = [*rest, "--", *after] if rest and after else [*rest, *after]
    forward = f" -- {shlex.join(tail)}" if tail else ""
    if found:
        env = next((t[1:] for t in found if t.startswith("@")), None)
        for index, token in enumerate(found[:-1]):
            if token in ("-e", "--env"):
                env = found[index + 1]
        env = env or next((t.split("=", 1)[1] for t in found if t.startswith("--env=")), None)
        alternative = f" (or `fdl @{env} {name}{forward}`)" if env and found != [f"@{env}"] else ""
        return UsageError(
            f"`fdl {name}` takes its arguments after `--`, and fdl's own options go before "
            f"the command name (got {shlex.join(before)})",
            hint=f"`fdl {shlex.join(found)} {name}{forward}`{alternative}; to hand them to "
            f"the script: `fdl {name} -- {shlex.join([*before, *(['--', *after] if after else [])])}`",
        )
    shown = shlex.join(before)
    after_text = f" -- {shlex.join(after)}" if after else ""
    return UsageError(
        f"`fdl {name}` takes its arguments after `--` (got {shown})",
        hint=f"fdl {name} -- {shown}{after_text}",
    )


@dataclass
class _Walk:
    root: Manifest
    env: str | None
    words: list[str]
    manifest: Manifest
    key: tuple[str, ...]
    directory: Path
    enclosing: Manifest | None = None

    def error(self, message: str, hint: str | None = None) -> ManifestError:
        where = locate(self.manifest, self.key, self.root.directory, at_key=True)
        return ManifestError(message, hint=hint, location=where)

    def run_kind(self, spec: dict[str, Any], tail: Sequence[str]) -> Resolution:
        flags = _split_flags(tail, run_kind=True)
        name = " ".join(self.words)
        if flags.before and not flags.help:
            raise _misplaced(name, flags.before, flags.after)
        return Resolution(
            Kind.RUN,
            tuple(self.words),
            spec,
            self.manifest,
            self.key,
            self.directory,
            help=flags.help,
            dry_run=flags.dry_run,
            no_append=flags.no_append,
            args=flags.after or [],
        )

    def entry_kind(
        self, nested: Manifest, spec: dict[str, Any], kind: Kind, tail: Sequence[str]
    ) -> Resolution:
        flags = _split_flags(tail, run_kind=False)
        resolution = Resolution(
            kind,
            tuple(self.words),
            spec,
            self.manifest,
            self.key,
            nested.directory,
            nested=nested,
            help=flags.help,
            dry_run=flags.dry_run,
            refresh_schema=flags.refresh_schema,
            args=flags.before,
            passthrough=flags.after,
        )
        if kind is Kind.PRESET or nested.data.get("entry"):
            return resolution
        commands = list(nested.data.get("commands") or {})
        if flags.help or not tail:
            resolution.kind = Kind.GROUP
            return resolution
        name = " ".join(self.words)
        listing = ", ".join(commands) if commands else "none"
        if not flags.before and not flags.after:
            # only fdl's own flags (`fdl flodl-hf --dry-run`): a group has nothing to run
            first = commands[0] if commands else "<command>"
            raise UsageError(
                f"`fdl {name}` is a group of commands (its manifest has no entry:), "
                f"so there is nothing to run by itself",
                hint=f"name one of its commands ({listing}), e.g. `fdl {name} {first} "
                f"{shlex.join(tail)}`",
            )
        close = did_you_mean(tail[0], commands)
        raise UsageError(
            f"`{tail[0]}` is not a command of `fdl {name}` (it has no entry: to pass it to)",
            hint=f"did you mean `fdl {name} {close}`?" if close else f"its commands: {listing}",
        )

    def nested_manifest(self, spec: dict[str, Any] | None) -> Manifest:
        name = self.words[-1]
        target = (spec or {}).get("path") or name
        directory = (self.directory / target).resolve()
        nested = load_nested(directory, self.env, self.root.directory)
        if nested is None:
            shown = display_name(directory, self.root.directory)
            how = "its `path:`" if (spec or {}).get("path") else "the convention `<name>/fdl.yml`"
            raise self.error(
                f"command {name!r} refers to a nested manifest in {shown}/ ({how}), but there is none",
                hint=f"create {shown}/fdl.yml, or give the command a `run:` script",
            )
        return nested


def resolve(root: Manifest, name: str, tail: Sequence[str], *, env: str | None) -> Resolution:
    """Find what ``fdl <name> <tail...>`` runs (:func:`_resolve`), and whether the manifest
    marks it ``cluster: true`` (floDl's launcher mode: :mod:`fdl.tasks._cluster`).

    Raises:
        UsageError: as :func:`_resolve`.
        ManifestError: as :func:`_resolve`.
    """
    resolution = _resolve(root, name, tail, env=env)
    if resolution.help:
        return resolution
    # the deepest `cluster:` wins: the command's own, else its top-level command's
    marked: list[tuple[Manifest, tuple[str, ...], Any]] = [
        (root, ("commands", name, "cluster"), (root.data.get("commands") or {}).get(name))
    ]
    marked.append((resolution.manifest, (*resolution.key, "cluster"), resolution.spec))
    found = None
    for manifest, key, spec in marked:
        if isinstance(spec, dict) and "cluster" in spec:
            found = (manifest, key, bool(spec["cluster"]))
    if found is not None and found[2]:
        manifest, key, _ = found
        origin = manifest.origin(key)
        resolution.cluster = True
        resolution.cluster_at = origin.location() if origin is not None and origin.line else None
    return resolution


def _resolve(root: Manifest, name: str, tail: Sequence[str], *, env: str | None) -> Resolution:
    """Find what ``fdl <name> <tail...>`` runs.

    Args:
        root: The project's root manifest (validated).
        name: The command name (a key of its ``commands``).
        tail: Everything after the name.
        env: The selected environment (nested manifests get their overlay too).

    Raises:
        UsageError: arguments in the wrong place or an unknown sub-command.
        ManifestError: a nested manifest is missing or invalid.
    """
    commands = root.data.get("commands") or {}
    walk = _Walk(root, env, [name], root, ("commands", name), root.directory)
    spec: dict[str, Any] | None = commands.get(name)
    tail = list(tail)
    while True:
        kind = command_kind(spec)
        if kind == "run":
            assert spec is not None
            return walk.run_kind(spec, tail)
        if kind == "preset":
            if walk.enclosing is None:
                raise walk.error(f"preset {name!r} is not inside a nested manifest")
            assert spec is not None
            resolution = walk.entry_kind(walk.enclosing, spec, Kind.PRESET, tail)
            if not resolution.help:
                problems = preset_problems(walk.enclosing, root.directory).get(walk.words[-1])
                if problems:
                    raise problems[0] if len(problems) == 1 else ManifestErrors(problems)
            return resolution
        nested = walk.nested_manifest(spec)
        children = nested.data.get("commands") or {}
        if tail and tail[0] in children:
            child = tail.pop(0)
            walk.words.append(child)
            walk.manifest, walk.key, walk.directory = nested, ("commands", child), nested.directory
            walk.enclosing = nested
            spec = children[child]
            continue
        entry_spec = spec or {}
        resolution = walk.entry_kind(nested, entry_spec, Kind.ENTRY, tail)
        if tail and not tail[0].startswith("-") and resolution.kind is Kind.ENTRY:
            close = did_you_mean(tail[0], list(children))
            if close:
                resolution.notes.append(
                    f"`{tail[0]}` is not a command of `fdl {resolution.name}` "
                    f"(did you mean `{close}`?); passing it to the entry"
                )
        return resolution
