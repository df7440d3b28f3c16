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
from fdl.cli._failure import report, report_bug
from fdl.cli._globals import parse_globals
from fdl.cli._registry import BUILTINS
from fdl.errors import ExitCode, FdlError, Interrupted, Terminated

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType

    from fdl.cli._session import Session

__all__ = ["main"]

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
        from fdl.cli._fastpath import try_fast_path

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
