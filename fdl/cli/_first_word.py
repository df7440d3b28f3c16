"""The first-argument overlay form: ``fdl <env> <command>`` (floDl's form: ci test).

``fdl WORD ...`` where ``fdl.WORD.yml`` sits beside the project's manifest selects the
environment ``WORD``, as ``fdl @WORD ...`` does, when ``WORD`` is no command. When it is
also a command (a built-in or one of the project's), the words decide, never silently:

- the environment wins when the next word is a command (built-in or the project's) that
  ``WORD``'s command does not take as its own sub-command: fdl ci test, in floDl's
  repository, whose ``ci`` is a project command, runs ``test`` with ``fdl.ci.yml``;
- otherwise the command runs (``fdl ci generate``, ``fdl ci``, ``fdl ci --help``).

A note says which reading was taken whenever the next word is a command, so the other
is one explicit form away (``fdl @WORD ...`` or ``fdl run WORD ...``), except for a
built-in's own sub-command when the project has no command of that name (``fdl ci
check`` beside fdl.ci.yml and a project command ``check``: the documented reading). An explicit
selection (``--env``, ``@NAME``, ``$FDL_ENV``) turns the form off, as in floDl's CLI.
"""

from __future__ import annotations

from fdl.cli._registry import BUILTINS
from fdl.errors import FdlError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fdl.cli._session import Session

__all__ = ["apply_first_word"]


def _builtin_subcommands(name: str) -> list[str]:
    """The sub-commands of a built-in group (none for a single built-in)."""
    builtin = BUILTINS.get(name)
    if builtin is None or builtin.single:
        return []
    from importlib import import_module

    import typer

    app = getattr(import_module(builtin.module), "app", None)
    if not isinstance(app, typer.Typer):
        return []
    return sorted(getattr(typer.main.get_command(app), "commands", None) or {})


def _project_subcommands(session: Session, name: str, commands: dict[str, object]) -> list[str]:
    """The sub-commands of the project command ``name`` (its nested manifest's)."""
    spec = commands.get(name)
    if name not in commands or (isinstance(spec, dict) and spec.get("run") is not None):
        return []
    from fdl.tasks import load_nested

    try:
        manifest = session.manifest(None)
        target = spec.get("path") if isinstance(spec, dict) else None
        directory = (manifest.directory / (target or name)).resolve()
        nested = load_nested(directory, None, manifest.directory)
    except FdlError:
        return []
    return list((nested.data.get("commands") or {}) if nested is not None else {})


def apply_first_word(session: Session, rest: list[str]) -> list[str]:
    """``rest`` without its first word when that word selects an environment (which is
    then the session's); else ``rest`` unchanged. Notes the reading taken on a clash."""
    if session.env is not None or not rest:
        return rest
    word = rest[0]
    if word.startswith("-"):
        return rest
    from fdl.manifest import discover, find_overlay

    try:
        # the project's directory, without Session.discover's offer to copy an example
        # file: a built-in that never reads the manifest must not ask for one
        found = discover(session.cwd, session.options.manifest)
        root = found.path
        if session.options.manifest is None:
            from fdl.tasks import enclosing_manifest

            root = enclosing_manifest(found.path)
        overlay = find_overlay(root.parent, word, required=False)
    except FdlError:
        return rest  # no project, a name no file can have, two overlay files: as before
    if overlay is None:
        return rest
    try:
        commands = dict(session.manifest(None).data.get("commands") or {})
    except FdlError:
        commands = {}  # a broken manifest must not take the built-ins with it
    options = session.options
    if word not in BUILTINS and word not in commands:
        options.env, options.env_from = word, f"the first word `{word}`"
        return rest[1:]
    following = rest[1] if len(rest) > 1 else None
    if following is None or (following not in BUILTINS and following not in commands):
        return rest  # `fdl ci generate`, `fdl ci --help`: only the command reads so
    takes = following in _builtin_subcommands(word) or following in _project_subcommands(
        session, word, commands
    )
    what = "the built-in" if word in BUILTINS and word not in commands else "a command"
    if takes and word not in commands:
        # `fdl ci check` where `ci` is only fdl's built-in: its own sub-command is the
        # documented reading, said on every run it would only be noise (`fdl @ci check`
        # is the explicit form of the other).
        return rest
    if takes:
        session.console.note(
            f"`{word}` is {what} and an environment ({overlay.name}): running the command "
            f"`fdl {word} {following}`; `fdl @{word} {following}` runs `{following}` with "
            "the overlay"
        )
        return rest
    other = f"; `fdl run {word} ...` runs the command `{word}`" if word in commands else ""
    session.console.note(
        f"`{word}` is {what} and an environment ({overlay.name}): `{following}` is a command, "
        f"so this runs `fdl @{word} {following}`{other}"
    )
    options.env, options.env_from = word, f"the first word `{word}`"
    return rest[1:]
