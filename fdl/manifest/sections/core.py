"""Core sections: ``description`` and the project's ``commands``."""

from __future__ import annotations

from fdl.manifest._nodes import MapNode, ScalarNode
from fdl.manifest.schema import AnyValue, Checker, MapOf, Obj, Spec, Str

__all__ = ["COMMAND", "ROOT_VALIDATORS", "SECTIONS", "check_command_kind"]

COMMAND_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def _is_set(node: MapNode, key: str) -> bool:
    child = node.entries.get(key)
    return child is not None and not (isinstance(child, ScalarNode) and child.value is None)


def check_command_kind(
    node: MapNode, path: tuple[str, ...], checker: Checker, *, top_level: bool
) -> None:
    """Report commands whose keys do not make one valid kind (at load time)."""
    name = path[-1] if path else "?"
    runs = _is_set(node, "run")
    if _is_set(node, "docker") and not runs:
        checker.fail(
            node.entries["docker"],
            (*path, "docker"),
            f"command {name!r} has `docker:` but no `run:`",
            "`docker:` wraps an inline `run:` script; add `run:` or move `docker:` into the nested manifest",
        )
    if _is_set(node, "append") and not runs:
        checker.fail(
            node.entries["append"],
            (*path, "append"),
            f"command {name!r} has `append:` but no `run:`",
            "`append:` adds trailing arguments to `run:`; add `run:` or remove `append:`",
        )
    if runs and _is_set(node, "path"):
        checker.fail(
            node.entries["path"],
            (*path, "path"),
            f"command {name!r} has both `run:` and `path:`",
            "keep one: `run:` for an inline script, `path:` for a nested manifest",
        )
    if top_level and not runs and not _is_set(node, "path") and _is_set(node, "options"):
        checker.fail(
            node.entries["options"],
            (*path, "options"),
            f"command {name!r} is a preset (only `options:`) at the top level",
            "presets belong in a nested manifest that declares `entry:`",
        )


def _check_root_commands(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    commands = node.entries.get("commands")
    if not isinstance(commands, MapNode):
        return
    for name, entry in commands.entries.items():
        if isinstance(entry, MapNode):
            check_command_kind(entry, (*path, "commands", name), checker, top_level=True)


COMMAND: Spec = Obj(
    {
        "description": Str("One line shown in `fdl --help`."),
        "run": Str("Inline shell script run by `fdl <name>`."),
        "append": Str("Arguments appended after the user's arguments (split on its own `--`)."),
        "path": Str("Directory of a nested manifest (relative to this file)."),
        "docker": Str("docker compose service the `run:` script runs in."),
        "options": MapOf(AnyValue(), "Options a preset passes to the entry, as flags."),
    },
    description="A project command: `run:` (inline script) or `path:` (nested manifest).",
)

SECTIONS: dict[str, Spec] = {
    "description": Str("What this project is (shown in `fdl --help`)."),
    "commands": MapOf(
        COMMAND,
        "Commands run with `fdl <name>`.",
        key_pattern=COMMAND_NAME,
        key_example="`test`, `cuda-build`",
    ),
}

ROOT_VALIDATORS = [_check_root_commands]
