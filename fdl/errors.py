"""Error types of fdl and the exit codes they map to.

The core raises these; only the CLI turns them into messages and exit codes
(``fdl.cli._failure``). Every error carries what is wrong, where (a manifest
location when there is one) and how to fix it.

Exit codes (documented in the README):

====  ===================================================================
code  meaning
====  ===================================================================
0     success
1     the operation failed (a build, a verification, a check with --strict)
2     usage error: unknown option, bad argument value, wrong command form
3     manifest error: not found, cannot be parsed, fails validation
4     environment problem: a required tool, engine or file is missing or
      incompatible (docker not answering, nvcc cannot target an arch, ...)
5     network error: a download failed after its retries
70    internal error (a bug in fdl; run with -v for the traceback)
130   interrupted (Ctrl-C)
143   terminated (SIGTERM)
====  ===================================================================

Manifest commands (``fdl <command>``) exit with their child's exit code.
"""

from __future__ import annotations

from enum import IntEnum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "CommandFailed",
    "EnvironmentProblem",
    "ExitCode",
    "FdlError",
    "Interrupted",
    "Location",
    "ManifestError",
    "ManifestErrors",
    "ManifestNotFound",
    "NetworkError",
    "Terminated",
    "UsageError",
    "environment_problem",
]


class ExitCode(IntEnum):
    """Process exit codes of the ``fdl`` command."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    MANIFEST = 3
    ENVIRONMENT = 4
    NETWORK = 5
    BUG = 70
    INTERRUPTED = 130
    TERMINATED = 143


class Location:
    """A place in a file: 1-based line and column (0 when unknown).

    (A plain class rather than a dataclass: importing dataclasses costs
    start-up time that `fdl config show` cannot afford.)
    """

    __slots__ = ("column", "file", "line", "path")

    def __init__(self, file: str, line: int = 0, column: int = 0, path: Path | None = None) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.path = path

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Location):
            return NotImplemented
        return (self.file, self.line, self.column) == (other.file, other.line, other.column)

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.column))

    def __repr__(self) -> str:
        return f"Location({self.file!r}, {self.line}, {self.column})"

    def __str__(self) -> str:
        if self.line and self.column:
            return f"{self.file}:{self.line}:{self.column}"
        if self.line:
            return f"{self.file}:{self.line}"
        return self.file


class FdlError(Exception):
    """Base of every error fdl reports to a user (no traceback shown).

    Args:
        message: What is wrong, one sentence.
        hint: How to fix it (a command to run, a value to change).
        location: Where it comes from (manifest file:line:col), if anywhere.
        details: Extra lines shown under the message (e.g. the tail of a log).
    """

    exit_code: ExitCode = ExitCode.FAILURE
    # Lines shown only with -v (a tool's own output behind a classified error).
    verbose_details: str | None = None

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: Location | None = None,
        details: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.location = location
        self.details = details

    def __str__(self) -> str:
        prefix = f"{self.location}: " if self.location else ""
        return f"{prefix}{self.message}"


class UsageError(FdlError):
    """The command line is wrong (unknown option, bad value, wrong form)."""

    exit_code = ExitCode.USAGE


class ManifestError(FdlError):
    """The manifest cannot be found, parsed or validated."""

    exit_code = ExitCode.MANIFEST


class ManifestNotFound(ManifestError):
    """No manifest exists where fdl looked (outside any project)."""


class ManifestErrors(ManifestError):
    """Several manifest problems found at once (validation reports them all)."""

    def __init__(self, errors: list[ManifestError]) -> None:
        count = len(errors)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the manifest")
        self.errors = errors


class EnvironmentProblem(FdlError):
    """A tool, engine or file the operation needs is missing or incompatible."""

    exit_code = ExitCode.ENVIRONMENT


class NetworkError(FdlError):
    """A download or remote request failed after its retries."""

    exit_code = ExitCode.NETWORK


class CommandFailed(FdlError):
    """An external command exited with a non-zero status.

    Args:
        argv: The command that failed.
        returncode: Its exit status.
        output_tail: The last lines it printed (shown to the user).
        log_file: Where the full output was written, if anywhere.
    """

    def __init__(
        self,
        argv: list[str],
        returncode: int,
        *,
        output_tail: str = "",
        log_file: Path | None = None,
        hint: str | None = None,
        message: str | None = None,
    ) -> None:
        shown = " ".join(argv)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        text = message or f"`{shown}` exited with status {returncode}"
        if log_file is not None:
            text += f" (full log: {log_file})"
        super().__init__(text, hint=hint, details=output_tail or None)
        self.argv = argv
        self.returncode = returncode
        self.log_file = log_file


class Interrupted(BaseException):
    """The user pressed Ctrl-C (or the process got SIGINT/SIGTERM).

    Not an :class:`FdlError`, nor an ``Exception``: a signal is never a failure that an
    ``except FdlError`` (or ``except Exception``) around a probe or a fallback takes for a
    miss and goes on after (issue 42: setup's look at the installed torch turned SIGTERM
    into exit 5). It unwinds like ``KeyboardInterrupt`` (``finally`` blocks run) and the
    CLI exits 130 (143 for :class:`Terminated`). It carries FdlError's attributes, so it
    is reported the same way.
    """

    exit_code: ExitCode = ExitCode.INTERRUPTED
    hint: str | None = None
    location: Location | None = None
    details: str | None = None
    verbose_details: str | None = None

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)
        self.message = message


class Terminated(Interrupted):
    """The process got SIGTERM (a scheduler, ``kill``): cleaned up, exit 128 + 15."""

    exit_code = ExitCode.TERMINATED

    def __init__(self, message: str = "terminated (SIGTERM)") -> None:
        super().__init__(message)


# What a failed file-system call means for the user, by errno: the environment (disk, rights,
# paths) is the problem, not fdl. Anything else stays a bug.
_OS_HINTS = {
    "ENOSPC": "free some disk space (or point FDL_HOME/FDL_CACHE_DIR elsewhere) and run again",
    "EDQUOT": "your disk quota is used up: free some space and run again",
    "EACCES": "fix the permissions of that path, or use another directory",
    "EPERM": "fix the permissions of that path, or use another directory",
    "EROFS": "that file system is read-only: use another directory",
    "ENAMETOOLONG": "use a shorter path",
    "ENOTDIR": "a component of that path is a file, not a directory: use another path",
    "EISDIR": "that path is a directory where a file was expected: use another path",
    "ELOOP": "that path has a symbolic-link loop: fix or remove the link",
    "EMFILE": "too many open files: raise the limit (ulimit -n) and run again",
    "ENFILE": "the system is out of file handles: close programs and run again",
    "EIO": "the disk reported an I/O error: check it (dmesg) before running again",
    "EXDEV": "that path is on another file system than fdl's own directory: use one beside it",
}


def environment_problem(exc: OSError) -> EnvironmentProblem | None:
    """The documented error for a file-system failure (disk full, permissions, path too
    long...), or None when the errno is not one a user can fix."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    hint = _OS_HINTS.get(name)
    if hint is None:
        return None
    filename = exc.filename or _path_in_traceback(exc)
    where = f" {filename}" if filename else ""
    if exc.filename2:
        where += f" -> {exc.filename2}"
    reason = exc.strerror or name
    return EnvironmentProblem(f"cannot use{where}: {reason}", hint=hint)


# The names fdl's writers give the file they write, most telling first.
_PATH_NAMES = ("path", "dest", "destination", "target", "results", "script", "temporary")


def _path_in_traceback(exc: BaseException) -> str | None:
    """The file a failed write was writing, when the system call did not say (``write()``
    on a full disk raises ENOSPC without a file name): the innermost frame of the
    traceback that holds a path under one of the usual names."""
    import os

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        local = frame.f_locals
        for name in _PATH_NAMES:
            value = local.get(name)
            if isinstance(value, os.PathLike) or (
                isinstance(value, str) and name == "temporary" and value
            ):
                return os.fspath(value)
    return None
