"""The schema of a nested manifest (``<dir>/fdl.yml`` reached by a ``path:`` command).

A nested manifest has an ``entry:`` (the program its presets and extra
arguments run), optional ``docker:`` service, a ``schema:`` describing the
entry's options and arguments, default ``options:`` and structured sections,
and its own ``commands:`` (inline scripts, presets, deeper nested manifests).
"""

from __future__ import annotations

from functools import cache

from fdl.errors import ManifestError
from fdl.manifest._nodes import MapNode, ScalarNode, is_set
from fdl.manifest.schema import AnyValue, Bool, Checker, MapOf, Obj, Spec, Str
from fdl.manifest.sections._command_schema import SCHEMA, choice_matches, value_fits
from fdl.manifest.sections._structured import SECTIONS as STRUCTURED
from fdl.manifest.sections._structured import section_spec
from fdl.manifest.sections.core import (
    RENAMED_NESTED_KEYS,
    check_commands,
    commands_spec,
    preset_key,
)

__all__ = ["nested_spec", "preset_problems"]


def _is_preset(node: MapNode) -> bool:
    if is_set(node, "run") or is_set(node, "path"):
        return False
    return preset_key(node) is not None


def _schema_options(root: MapNode) -> tuple[dict[str, MapNode], bool]:
    schema = root.entries.get("schema")
    if not isinstance(schema, MapNode):
        return {}, False
    strict_node = schema.entries.get("strict")
    strict = isinstance(strict_node, ScalarNode) and strict_node.value is True
    options = schema.entries.get("options")
    if not isinstance(options, MapNode):
        return {}, strict
    return {k: v for k, v in options.entries.items() if isinstance(v, MapNode)}, strict


def _declared(options: dict[str, MapNode], key: str) -> MapNode | None:
    return options.get(key) or options.get(key.replace("_", "-"))


def _check_option_values(
    options_node: MapNode,
    path: tuple[str, ...],
    schema: dict[str, MapNode],
    strict: bool,
    checker: Checker,
) -> None:
    for key, value in options_node.entries.items():
        where = (*path, key)
        declared = _declared(schema, key)
        if declared is None:
            if strict:
                checker.fail(
                    value,
                    where,
                    f"option {key!r} is not declared in schema.options (the schema is strict)",
                    "declare it under schema.options, or remove it",
                )
            continue
        plain = value.plain()
        if plain is None or plain is False:
            continue
        type_node = declared.entries.get("type")
        type_name = type_node.value if isinstance(type_node, ScalarNode) else "string"
        if isinstance(type_name, str) and not value_fits(type_name, plain):
            checker.fail(value, where, f"option {key!r} must be a {type_name} value")
        choices = declared.entries.get("choices")
        if choices is not None and isinstance(choices.plain(), list):
            allowed = choices.plain()
            assert isinstance(allowed, list)
            if not choice_matches(plain, allowed):
                shown = ", ".join(str(c) for c in allowed)
                checker.fail(value, where, f"option {key!r} is {plain!r}; allowed: {shown}")


def _check_presets(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    """Presets need an entry, and the manifest's own options must fit the schema.

    A preset's option values are not checked here: a bad value in one preset is that
    preset's problem (:func:`preset_problems`), reported when it runs and shown in help,
    and must not disable the rest of the manifest.
    """
    schema, strict = _schema_options(node)
    root_options = node.entries.get("options")
    if isinstance(root_options, MapNode):
        _check_option_values(root_options, (*path, "options"), schema, strict, checker)
    commands = node.entries.get("commands")
    if not isinstance(commands, MapNode):
        return
    has_entry = is_set(node, "entry")
    for name, command in commands.entries.items():
        if not isinstance(command, MapNode) or not _is_preset(command):
            continue
        if not has_entry:
            checker.fail(
                command,
                (*path, "commands", name),
                f"preset {name!r} has no `entry:` to run",
                "add `entry:` (the program the presets run) at the top of this manifest",
            )


def preset_problems(node: MapNode, probed: MapNode | None = None) -> dict[str, list[ManifestError]]:
    """Each preset's option values that do not fit the manifest's schema (a value outside
    its ``choices``, of the wrong type, or undeclared in a strict schema), by preset.

    Args:
        probed: The schema the entry gave (``compile: true``), as a tree holding its
            ``schema``: it replaces the inline one, as it does for the options.
    """
    schema, strict = _schema_options(probed if probed is not None else node)
    commands = node.entries.get("commands")
    problems: dict[str, list[ManifestError]] = {}
    if not isinstance(commands, MapNode):
        return problems
    for name, command in commands.entries.items():
        if not isinstance(command, MapNode) or not _is_preset(command):
            continue
        options = command.entries.get("options")
        if not isinstance(options, MapNode):
            continue
        checker = Checker()
        _check_option_values(options, ("commands", name, "options"), schema, strict, checker)
        if checker.errors:
            problems[name] = checker.errors
    return problems


def _check_docker(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    if is_set(node, "docker") and not is_set(node, "entry"):
        checker.fail(
            node.entries["docker"],
            (*path, "docker"),
            "`docker:` at the top of a nested manifest wraps its `entry:`, which is missing",
            "add `entry:`, or put `docker:` on the `run:` commands that need it",
        )


def _check_nested_commands(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    check_commands(node, path, checker, top_level=False)


@cache
def nested_spec() -> Obj:
    """The schema of a nested manifest."""
    fields: dict[str, Spec] = {
        "description": Str("What these commands do (shown in `fdl --help`)."),
        "entry": Str("Shell command that presets and extra arguments run, e.g. `python train.py`."),
        "docker": Str("docker compose service the entry runs in."),
        "arg-name": Str("Placeholder for the preset slot in help (default: preset)."),
        "compile": Bool(
            "Ask the entry for its options: `<entry> --fdl-schema` is run once (when the "
            "command runs or its help is asked for, never for `fdl --help`) and its JSON "
            "replaces `schema:` until the entry's program or this manifest changes."
        ),
        "schema": SCHEMA,
        "options": MapOf(AnyValue(), "Options always passed to the entry (presets override)."),
    }
    for section in STRUCTURED:
        fields[section] = section_spec(section)
    fields["commands"] = commands_spec("Sub-commands: `fdl <name> <sub-command>`.")
    return Obj(
        fields,
        description="nested fdl manifest (reached through a `path:` command)",
        validators=[_check_nested_commands, _check_presets, _check_docker],
        renamed=RENAMED_NESTED_KEYS,
    )
