"""Core sections: ``description`` and the project's ``commands``.

A command is one of four kinds, decided by its keys:

- ``run:``  an inline shell script (``append:`` and ``docker:`` only go with it);
- ``path:`` a directory with a nested manifest;
- a preset: only ``options:`` and/or structured sections (``training:`` ...),
  which runs the enclosing nested manifest's ``entry:`` (never at the top level);
- nothing of the above: the nested manifest in the sibling directory ``<name>/``.

Mixed kinds are reported when the manifest loads, with file:line.
"""

from __future__ import annotations

from fdl.manifest._nodes import MapNode, Node, is_set
from fdl.manifest.schema import AnyValue, Bool, Checker, MapOf, Obj, Spec, Str
from fdl.manifest.sections._structured import SECTIONS as STRUCTURED
from fdl.manifest.sections._structured import section_spec

__all__ = [
    "COMMAND",
    "COMMAND_NAME",
    "PRESET_KEYS",
    "ROOT_VALIDATORS",
    "SECTIONS",
    "check_command_kind",
    "check_commands",
    "commands_spec",
    "preset_key",
]

COMMAND_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
PRESET_KEYS = ("options", *STRUCTURED)


def _is_set(node: MapNode, key: str) -> bool:
    if not is_set(node, key):
        return False
    child = node.entries[key]
    return not (isinstance(child, MapNode) and not child.entries)


def preset_key(node: MapNode) -> str | None:
    """The first preset key (``options:``, ``training:`` ...) set on ``node``, if any."""
    return next((key for key in PRESET_KEYS if _is_set(node, key)), None)


def check_command_kind(
    node: MapNode, path: tuple[str, ...], checker: Checker, *, top_level: bool
) -> None:
    """Report commands whose keys do not make one valid kind (at load time)."""
    name = path[-1] if path else "?"
    runs = _is_set(node, "run")
    paths = _is_set(node, "path")
    found = preset_key(node)
    if _is_set(node, "docker") and not runs:
        checker.fail(
            node.entries["docker"],
            (*path, "docker"),
            f"command {name!r} has `docker:` but no `run:`",
            "`docker:` wraps an inline `run:` script; for a nested manifest put `docker:` in its fdl.yml",
        )
    if _is_set(node, "append") and not runs:
        checker.fail(
            node.entries["append"],
            (*path, "append"),
            f"command {name!r} has `append:` but no `run:`",
            "`append:` adds trailing arguments to `run:`; add `run:` or remove `append:`",
        )
    if runs and paths:
        checker.fail(
            node.entries["path"],
            (*path, "path"),
            f"command {name!r} has both `run:` and `path:`",
            "keep one: `run:` for an inline script, `path:` for a nested manifest",
        )
    if found is not None and (runs or paths):
        other = "run" if runs else "path"
        checker.fail(
            node.entries[found],
            (*path, found),
            f"command {name!r} has `{found}:` and `{other}:`",
            f"`{found}:` makes a preset of a nested manifest's entry; "
            f"a `{other}:` command cannot take it",
        )
    elif found is not None and top_level:
        checker.fail(
            node.entries[found],
            (*path, found),
            f"command {name!r} is a preset (only `{found}:`) at the top level",
            "presets belong in a nested manifest that declares `entry:`",
        )


def check_commands(
    node: MapNode, path: tuple[str, ...], checker: Checker, *, top_level: bool
) -> None:
    """Run :func:`check_command_kind` on every entry of ``node``'s ``commands``."""
    commands: Node | None = node.entries.get("commands")
    if not isinstance(commands, MapNode):
        return
    for name, entry in commands.entries.items():
        if isinstance(entry, MapNode):
            check_command_kind(entry, (*path, "commands", name), checker, top_level=top_level)


def _check_root_commands(node: MapNode, path: tuple[str, ...], checker: Checker) -> None:
    check_commands(node, path, checker, top_level=True)


def _command_fields() -> dict[str, Spec]:
    fields: dict[str, Spec] = {
        "description": Str("One line shown in `fdl --help`."),
        "run": Str("Inline shell script run by `fdl <name>` (user arguments go at its end)."),
        "append": Str("Text added after the user's arguments (split on its own `--`)."),
        "path": Str(
            "Directory of a nested manifest (relative to this file).",
            pattern=r"[^\x00-\x1f\x7f]+",
            example="train",
            rule="a directory name without control characters",
        ),
        "docker": Str("docker compose service the `run:` script runs in."),
        "options": MapOf(AnyValue(), "Preset: options passed to the entry as --flags."),
        "cluster": Bool(
            "floDl's multi-host fan-out (its fdl.cluster.yml): the reference CLI launches a "
            "command marked true on every host of `cluster:`. fdl does not: running such a "
            "command is refused with the fix (fdl deploy for SLURM and Kubernetes); the "
            "other commands run as usual."
        ),
    }
    for section in STRUCTURED:
        fields[section] = section_spec(section)
    return fields


COMMAND: Spec = Obj(
    _command_fields(),
    description=(
        "A project command: `run:` (inline script), `path:` (nested manifest), "
        "a preset (`options:`, nested manifests only), or empty (nested manifest in `<name>/`)."
    ),
)


def commands_spec(description: str) -> MapOf:
    """The ``commands:`` mapping (root and nested manifests share it)."""
    return MapOf(
        COMMAND,
        description,
        key_pattern=COMMAND_NAME,
        key_example="`test`, `cuda-build`",
    )


SECTIONS: dict[str, Spec] = {
    "name": Str(
        "The project's name (image names, CI tags, job names); `fdl init` records it. "
        "Without it, the directory's name is used, so a clone under another name "
        "would build other images.",
        pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        example="my-model",
        rule="letters, digits, '_', '.' and '-', starting with a letter or digit",
    ),
    "description": Str("What this project is (shown in `fdl --help`)."),
    "commands": commands_spec("Commands run with `fdl <name>`."),
}

ROOT_VALIDATORS = [_check_root_commands]

# Keys of older floDl manifests (its fdl.yml.example before `commands:` held everything,
# e.g. flodl-labs/flodl 8fff604), with the fix in place of a did-you-mean.
RENAMED_ROOT_KEYS = {
    "scripts": "older floDl manifests listed run commands under `scripts:`; move them under "
    "`commands:` (a list of directories there, `commands: [ddp-bench/]`, becomes "
    "`ddp-bench:` keys with no value)",
    "entry": "`entry:` belongs in a nested manifest, which a parent fdl.yml reaches through one "
    "of its `commands:` (`NAME: {path: ./DIR/}`, or an empty `NAME:` for `./NAME/`); declare "
    "this directory there and run it as `fdl NAME`",
}
RENAMED_NESTED_KEYS = {
    "jobs": "older floDl manifests called presets `jobs:`; rename it to `commands:`",
}
