"""The ``fdl`` command line: the entry path.

``main`` parses the global options (only before the command name) and answers the
commands that must start fast itself (``--version``, ``--help``, ``config show``,
shell completion) without importing typer. A built-in group's module
(:data:`fdl.cli._registry.BUILTINS`) is imported only when it is named and runs as a
typer app with the session as click's context object; any other name is a command of
the project's manifest. This is also the one place where errors become messages and
exit codes.
"""

from __future__ import annotations

import os
import sys

from fdl import __version__
from fdl.cli._console import Console, from_environment
from fdl.cli._globals import GlobalOptions, parse_globals
from fdl.cli._registry import BUILTINS
from fdl.errors import ExitCode, FdlError, Interrupted, ManifestErrors, Terminated

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType

    from fdl.cli._session import Session

__all__ = ["main", "report", "try_fast_path"]

# The hidden command the shell completion scripts call (see fdl.cli._complete).
COMPLETE = "__complete"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fdl`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    console = Console()
    try:
        options, rest = parse_globals(args)
        console = from_environment(options.verbosity, options.no_color)
        if options.version:
            console.out(f"fdl {__version__}")
            return 0
        fast = try_fast_path(options, rest, console)
        if fast is not None:
            return fast
        from fdl.cli._session import install

        session = install(options, console)
        if options.help or not rest:
            from fdl.cli._help import render_top_help

            console.out(render_top_help(session), end="")
            return 0
        if rest[0] == COMPLETE:
            from fdl.cli._complete import complete

            return complete(session, rest[1:])
        name, tail = rest[0], rest[1:]
        if name in BUILTINS:
            import signal

            signal.signal(signal.SIGINT, _interrupt)
            signal.signal(signal.SIGTERM, _terminate)
            return _run_builtin(name, tail, session)
        from fdl.cli._project import run_project_command

        return run_project_command(session, name, tail)
    except FdlError as error:
        return report(console, error)
    except KeyboardInterrupt:
        console.line("")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # stdout closed early (`fdl config show | head`): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        from fdl.errors import environment_problem

        problem = environment_problem(exc)
        return report(console, problem) if problem is not None else report_bug(console, exc)
    except Exception as exc:
        return report_bug(console, exc)


# --- the fast path: `config show` without typer ------------------------------------------
# Scripts and editors call `config show` often; typer and its parser cost about 50 ms to
# import, more than the rest of the command. This recognises the plain forms of
# `config show` and calls the same action the typer command calls; anything else
# (`--help`, unknown options) goes through typer, which reports it properly.
# tests/cli/test_fastpath.py checks both paths agree.

_FLAGS = {"--json": "as_json", "--no-origin": "no_origin", "--show-secrets": "show_secrets"}


def try_fast_path(options: GlobalOptions, rest: list[str], console: Console) -> int | None:
    """Run ``config show`` directly when its arguments are simple; else None."""
    if options.help or rest[:2] != ["config", "show"]:
        return None
    flags = {"as_json": False, "no_origin": False, "show_secrets": False}
    env: str | None = None
    args = rest[2:]
    index = 0
    while index < len(args):
        token = args[index]
        if token in _FLAGS:
            flags[_FLAGS[token]] = True
        elif (
            token in ("--env", "-e")
            and index + 1 < len(args)
            and not args[index + 1].startswith("-")
        ):
            env = args[index + 1]
            index += 1
        elif token.startswith("--env=") and len(token) > len("--env="):
            env = token.split("=", 1)[1]
        else:
            return None
        index += 1
    from fdl.cli import _config_actions
    from fdl.cli._session import install

    session = install(options, console)
    return _config_actions.show(
        session,
        env=env,
        as_json=flags["as_json"],
        origins=not flags["no_origin"],
        show_secrets=flags["show_secrets"],
    )


# --- errors: the one place where they become messages and exit codes ------------------------

MAX_LISTED = 20


def _one(console: Console, error: FdlError) -> None:
    console.error(str(error))
    if error.details:
        for line in error.details.strip("\n").splitlines():
            if line.strip():  # tool output tails often carry runs of empty lines
                console.line(f"  {line}")
    if error.hint:
        console.line(f"  {console.style('fix:', 'green')} {error.hint}")


def report(console: Console, error: FdlError) -> int:
    """Print ``error`` (what, where, how to fix) and return its exit code."""
    if isinstance(error, ManifestErrors):
        for item in error.errors[:MAX_LISTED]:
            _one(console, item)
        hidden = len(error.errors) - MAX_LISTED
        if hidden > 0:
            console.line(f"... and {hidden} more")
        console.line(f"{len(error.errors)} problems in the manifest")
        return int(error.exit_code)
    _one(console, error)
    return int(error.exit_code)


def report_bug(console: Console, exc: BaseException) -> int:
    """An unexpected exception: a short message, the trace with -v."""
    import traceback

    console.error(f"internal error: {type(exc).__name__}: {exc}")
    if console.verbosity >= 2:
        console.line("".join(traceback.format_exception(exc)).rstrip())
    else:
        console.line("  this is a bug in fdl; run again with -v to see the traceback and report it")
    return int(ExitCode.BUG)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # An FdlError rather than KeyboardInterrupt: click would turn the latter
    # into "Aborted!" with exit status 1.
    raise Interrupted()


def _terminate(signum: int, frame: FrameType | None) -> None:
    # Unwinds like Ctrl-C (locks released, staging removed), then exits 143.
    raise Terminated()


def _run_builtin(name: str, tail: list[str], session: Session) -> int:
    """Run a built-in group's typer app with the session as click's context object; its
    usage errors exit with 2."""
    from importlib import import_module

    module = import_module(BUILTINS[name].module)
    normalize = getattr(module, "normalize", None)
    if normalize is not None:
        tail = normalize(tail)
    try:
        result = module.app(args=tail, prog_name=f"fdl {name}", standalone_mode=True, obj=session)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return int(result or 0)
