"""The one place where errors become messages and exit codes."""

from __future__ import annotations

from fdl.cli._console import Console
from fdl.errors import ExitCode, FdlError, ManifestErrors

__all__ = ["report", "report_bug"]

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
