"""``fdl schema``: the schemas that ``compile: true`` entries gave about themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fdl.cli._session import Session
from fdl.cli.commands._common import JsonOption, group
from fdl.errors import ExitCode, FdlError

app = group(
    "schema",
    "The cached schemas of entries (`<entry> --fdl-schema`; `compile: true` ones are asked "
    "by themselves): list, clear or ask the entries again.\n\nExample: fdl schema list",
    no_args_is_help=True,
)

NameArgument = Annotated[
    str | None, typer.Argument(help="Only the cache of this command directory (its name).")
]


def _check_name(name: str | None, verb: str) -> None:
    """A command directory's name, never a path (`schema clear ../..` is refused)."""
    import re

    if name is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}", name):
        from fdl.errors import UsageError

        raise UsageError(
            f"fdl schema {verb}: {name!r} is not a command directory's name (a path or an "
            "empty name)",
            hint=f"name the directory as `fdl schema list` shows it, e.g. `fdl schema {verb} "
            "export`",
        )


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Every cached schema under the project, fresh (the program and manifest are those it
    was asked from), stale (asked again when the command next runs) or orphan.

    Example: fdl schema list --json
    """
    from fdl.tasks import find_caches

    session: Session = ctx.obj
    root = session.discover().directory
    caches = find_caches(root)
    if as_json:
        session.console.json(
            [{"name": c.name, "path": _shown(c.path, root), "status": c.status} for c in caches]
        )
        return
    if not caches:
        session.console.info(f"no cached schemas under {root}")
        session.console.info("commands with `compile: true` cache theirs when they first run")
        return
    width = max(len(c.name) for c in caches)
    for cache in caches:
        session.console.out(f"{cache.name:<{width}}  {_shown(cache.path, root)}  [{cache.status}]")


@app.command()
def clear(ctx: typer.Context, name: NameArgument = None) -> None:
    """Delete cached schemas (all, or one command directory's); they are asked for again
    when their commands next run. Only fdl's cache files are deleted.

    Example: fdl schema clear export
    """
    from fdl.tasks import find_caches

    session: Session = ctx.obj
    _check_name(name, "clear")
    root = session.discover().directory
    removed = 0
    for cache in find_caches(root):
        if name is not None and cache.name != name:
            continue
        if cache.path.is_dir() and not cache.path.is_symlink():
            # fdl writes files there; a directory is the user's (a link loses the link only)
            session.console.warn(f"{_shown(cache.path, root)}: a directory, not fdl's; kept")
            continue
        cache.path.unlink(missing_ok=True)
        removed += 1
        session.console.info(f"removed {_shown(cache.path, root)}")
        for folder in (cache.path.parent, cache.path.parent.parent):
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
    what = f" of {name!r}" if name else ""
    session.console.info(f"cleared {removed} cached schema{'s' if removed != 1 else ''}{what}")


@app.command()
def refresh(ctx: typer.Context, name: NameArgument = None) -> None:
    """Ask each cached command's entry again (`<entry> --fdl-schema`); exit 1 when one fails.

    Example: fdl schema refresh
    """
    from fdl.cli._project import run_project_command
    from fdl.tasks import find_caches

    session: Session = ctx.obj
    _check_name(name, "refresh")
    root = session.manifest()
    commands = root.data.get("commands") or {}
    failed = 0
    for cache in find_caches(root.directory):
        if name is not None and cache.name != name:
            continue
        command_dir = cache.path.parent.parent.parent
        words = _command_words(root.directory, command_dir, commands)
        if words is None:
            session.console.warn(f"{_shown(cache.path, root.directory)}: no command reaches it")
            failed += 1
            continue
        try:
            run_project_command(session, words[0], [*words[1:], "--refresh-schema"])
        except FdlError as error:
            failed += 1
            session.console.error(f"fdl {' '.join(words)}: {error}")
    if failed:
        raise typer.Exit(int(ExitCode.FAILURE))


def _command_words(root: Path, directory: Path, commands: dict[str, object]) -> list[str] | None:
    """The root command whose nested manifest is ``directory`` (path: or the convention)."""
    for command, spec in commands.items():
        target = (spec or {}).get("path") if isinstance(spec, dict) else None
        if (root / str(target or command)).resolve() == directory.resolve():
            return [command]
    relative = directory.relative_to(root) if directory.is_relative_to(root) else None
    if relative is not None and relative.parts and relative.parts[0] in commands:
        return list(relative.parts)
    return None
