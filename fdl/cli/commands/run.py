"""``fdl run NAME [ARGS...]``: run a project command by name.

For a command whose name a built-in shadows (a project command ``config``
runs as ``fdl run config``). A project command named ``run`` itself is what
``fdl run`` runs when no other project command is named first
(``fdl run -- --release``); ``fdl run run ...`` always reaches it.
"""

from __future__ import annotations

from fdl.cli._session import Session
from fdl.errors import UsageError

HELP = """\
Usage: fdl run NAME [ARGS...]

Run the project command NAME (as `fdl NAME ARGS...` would), also when a
built-in command has the same name. If the project declares a command named
`run`, `fdl run` without a project command name first runs that one.

Example: fdl run config -- --verbose
"""


def app(
    args: list[str], obj: Session, prog_name: str = "fdl run", standalone_mode: bool = True
) -> int:
    """Entry point called by the CLI router with the raw arguments (no option parsing) and
    the session (as click passes it to the typer groups)."""
    from fdl.cli._project import run_project_command

    session = obj
    manifest = session.manifest_or_none()
    commands = (manifest.data.get("commands") or {}) if manifest is not None else {}
    if args and not args[0].startswith("-") and args[0] in commands:
        return run_project_command(session, args[0], args[1:])
    if "run" in commands:
        return run_project_command(session, "run", args)
    if not args or args[0] in ("-h", "--help"):
        session.console.out(HELP, end="")
        return 0
    if args[0].startswith("-"):
        raise UsageError(
            f"fdl run: expected a command name, got {args[0]!r}",
            hint="fdl run NAME [ARGS...]; see `fdl run --help`",
        )
    return run_project_command(session, args[0], args[1:])
