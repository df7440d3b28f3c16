"""The ``schema:`` block of a nested manifest: the entry's options and arguments.

fdl validates the user's flags against it before starting anything (unknown
flags with did-you-mean, choices, types), uses it for help and completion,
and checks presets against it when the manifest loads.
"""

from __future__ import annotations

import re

from fdl.manifest._nodes import MapNode, ScalarNode, SeqNode, is_null
from fdl.manifest.schema import ENV_NAME, AnyValue, Bool, Checker, Enum, ListOf, MapOf, Obj, Str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_SUBCOMMAND_DEPTH",
    "OPTION_TYPES",
    "RESERVED_LONG",
    "RESERVED_SHORT",
    "SCHEMA",
    "choice_matches",
    "convert",
    "item_type",
    "value_fits",
]

OPTION_TYPES = (
    "string",
    "int",
    "float",
    "bool",
    "path",
    "list[string]",
    "list[int]",
    "list[float]",
    "list[path]",
)
# fdl reads these after a command name (before `--`); an entry cannot declare them.
RESERVED_LONG = ("help", "dry-run")
RESERVED_SHORT = ("h",)
LONG_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]*"

_INT = re.compile(r"[+-]?[0-9]+")


def item_type(type_name: str) -> str:
    """``list[int]`` -> ``int``; scalars unchanged."""
    if type_name.startswith("list[") and type_name.endswith("]"):
        return type_name[5:-1]
    return type_name


def convert(type_name: str, text: str) -> Any:
    """Parse a command-line value of scalar type ``type_name``.

    Raises:
        ValueError: ``text`` is not a value of that type.
    """
    scalar = item_type(type_name)
    if scalar == "int":
        if not _INT.fullmatch(text.strip()):
            raise ValueError(f"{text!r} is not an integer")
        return int(text)
    if scalar == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    if scalar == "bool":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"{text!r} is not true or false")
        return lowered == "true"
    return text


def _scalar_fits(scalar: str, value: Any) -> bool:
    if isinstance(value, bool):
        return scalar in ("bool", "string")
    if scalar in ("string", "path"):
        return isinstance(value, (str, int, float))
    if scalar in ("int", "float") and isinstance(value, (int, float)):
        return scalar == "float" or isinstance(value, int)
    if isinstance(value, str):
        try:
            convert(scalar, value)
        except ValueError:
            return False
        return True
    return False


def value_fits(type_name: str, value: Any) -> bool:
    """Whether a manifest value (default, choice, preset option) has ``type_name``."""
    scalar = item_type(type_name)
    if scalar != type_name and isinstance(value, list):
        return all(_scalar_fits(scalar, item) for item in value)
    return _scalar_fits(scalar, value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def choice_matches(value: Any, choices: list[Any]) -> bool:
    """Whether ``value`` is one of ``choices`` (``"32"`` matches ``32``)."""
    text = _text(value)
    return any(_text(choice) == text for choice in choices)


def _type_of(node: MapNode) -> str:
    found = node.entries.get("type")
    if isinstance(found, ScalarNode) and isinstance(found.value, str):
        return found.value
    return "string"


def _check_values(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    """``default`` and ``choices`` must have the declared type."""
    type_name = _type_of(node)
    if type_name not in OPTION_TYPES:
        return
    default = node.entries.get("default")
    if default is not None and not is_null(default) and not value_fits(type_name, default.plain()):
        checker.fail(default, (*path, "default"), f"default is not a {type_name} value")
    choices = node.entries.get("choices")
    if isinstance(choices, SeqNode):
        for index, item in enumerate(choices.items):
            if not value_fits(item_type(type_name), item.plain()):
                checker.fail(item, (*path, "choices", str(index)), f"choice is not {type_name}")


def _check_option(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    name = path[-1]
    if name in RESERVED_LONG:
        checker.fail(
            node,
            path,
            f"option --{name} is read by fdl itself",
            f"rename it; after a command name fdl reads {', '.join('--' + n for n in RESERVED_LONG)}"
            " and -h (pass them to the entry after `--`)",
        )
    short = node.entries.get("short")
    if isinstance(short, ScalarNode) and short.value in RESERVED_SHORT:
        checker.fail(short, (*path, "short"), f"short -{short.value} is read by fdl itself")
    _check_values(node, path, checker)


def _check_options(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    options = node.entries.get("options")
    if not isinstance(options, MapNode):
        return
    shorts: dict[str, str] = {}
    for name, option in options.entries.items():
        if not isinstance(option, MapNode):
            continue
        where = (*path, "options", name)
        _check_option(option, where, checker)
        short = option.entries.get("short")
        if isinstance(short, ScalarNode) and isinstance(short.value, str):
            other = shorts.get(short.value)
            if other is not None:
                checker.fail(
                    short, (*where, "short"), f"-{short.value} is also the short of --{other}"
                )
            shorts[short.value] = name


def _flag(node: MapNode, key: str) -> bool | None:
    found = node.entries.get(key)
    if isinstance(found, ScalarNode) and isinstance(found.value, bool):
        return found.value
    return None


def _check_args(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    args = node.entries.get("args")
    if not isinstance(args, SeqNode):
        return
    seen: set[str] = set()
    optional_seen = False
    last = len(args.items) - 1
    for index, arg in enumerate(args.items):
        if not isinstance(arg, MapNode):
            continue
        where = (*path, "args", str(index))
        name_node = arg.entries.get("name")
        name = name_node.value if isinstance(name_node, ScalarNode) else f"#{index}"
        if name in seen:
            checker.fail(arg, where, f"argument <{name}> is declared twice")
        seen.add(str(name))
        has_default = "default" in arg.entries
        required = _flag(arg, "required")
        if required is True and has_default:
            checker.fail(arg, where, f"argument <{name}> is required and has a default")
        is_required = required if required is not None else not has_default
        if is_required and optional_seen:
            checker.fail(arg, where, f"required argument <{name}> follows an optional one")
        optional_seen = optional_seen or not is_required
        if _flag(arg, "variadic") and index != last:
            checker.fail(arg, where, f"variadic argument <{name}> must be the last one")
        _check_values(arg, where, checker)


def _check_schema(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    _check_options(node, path, checker)
    _check_args(node, path, checker)


_TYPE = Enum(OPTION_TYPES, "Value type (default: string).")

OPTION = Obj(
    {
        "type": _TYPE,
        "description": Str("Shown in `fdl <command> --help`."),
        "default": AnyValue("The entry's default (documentation; fdl does not pass it)."),
        "choices": ListOf(AnyValue(), "Allowed values (checked before the entry starts)."),
        "short": Str("One-letter alias, e.g. m for -m.", pattern=r"[A-Za-z0-9]", example="m"),
        "env": Str(
            "Environment variable used when the option is not given.",
            pattern=ENV_NAME,
            example="DATA_DIR",
        ),
        "completer": Str("Shell command whose output lines complete the value."),
    },
    description="An option of the entry (--NAME).",
)

ARG = Obj(
    {
        "name": Str("Name shown as <NAME>.", pattern=LONG_NAME, example="run-id"),
        "type": _TYPE,
        "description": Str("Shown in help."),
        "required": Bool("Whether it must be given (default: true unless it has a default)."),
        "variadic": Bool("Takes every remaining argument (last argument only)."),
        "default": AnyValue("The entry's default (documentation)."),
        "choices": ListOf(AnyValue(), "Allowed values."),
        "completer": Str("Shell command whose output lines complete the value."),
    },
    description="A positional argument of the entry.",
    required=("name",),
)

# floDl 0.8.0's schema may be a tree: `#[derive(FdlArgs)]` on an enum of sub-commands answers
# --fdl-schema with `commands: {name: Schema}` and a `description` per node
# (flodl-cli-0.8.0/src/config/schema.rs:335-352, flodl-cli-macros-0.8.0/src/lib.rs:66-110).
# The tree is bounded here (a spec cannot refer to itself: the JSON Schema export would not
# end); floDl's own examples nest two levels.
MAX_SUBCOMMAND_DEPTH = 4
SUBCOMMAND_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def _check_tree(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    """A node is a leaf (args/options) or a branch (commands), never both (schema.rs:436)."""
    commands = node.entries.get("commands")
    if not isinstance(commands, MapNode) or not commands.entries:
        return
    for key in ("args", "options"):
        given = node.entries.get(key)
        if isinstance(given, (MapNode, SeqNode)) and (
            given.entries if isinstance(given, MapNode) else given.items
        ):
            checker.fail(
                given,
                (*path, key),
                "a schema with `commands` (sub-commands) cannot also have its own "
                f"`{key}` (floDl: a node is a leaf or a branch)",
                "move the options and arguments onto the sub-commands",
            )


def _schema(depth: int) -> Obj:
    fields = {
        "args": ListOf(ARG, "Positional arguments, in order."),
        "options": MapOf(
            OPTION, "Options by long name.", key_pattern=LONG_NAME, key_example="`model`"
        ),
        "strict": Bool("Reject flags the schema does not declare (default: pass them through)."),
        "description": Str("What the entry (or this sub-command) does; shown in help."),
    }
    if depth < MAX_SUBCOMMAND_DEPTH:
        fields["commands"] = MapOf(
            _schema(depth + 1),
            "The entry's sub-commands (`fdl <command> <sub-command> ...`), each with its "
            "own schema (floDl 0.8's FdlArgs derive on an enum).",
            key_pattern=SUBCOMMAND_NAME,
            key_example="`train`, `eval`",
            key_rule="letters, digits, '_', '.' and '-', starting with a letter or digit",
        )
    return Obj(
        fields,
        description="The entry's command-line interface, checked before it starts."
        if depth == 0
        else "A sub-command's interface.",
        validators=[_check_schema, _check_tree],
    )


SCHEMA = _schema(0)
