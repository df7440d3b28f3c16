"""Running a child in the foreground: the terminal and stdio inherited, signals forwarded.

Who gets a signal depends on how fdl was started:

- With a terminal on stdin, the child stays in fdl's process group, so the
  terminal's Ctrl-C / Ctrl-Z / hang-up reach it directly (and job control and
  interactive programs work). fdl ignores those terminal signals itself and
  forwards only signals sent to it by another process (``kill``).
- Without a terminal (CI, pipes, supervisors), the child gets its own process
  group, and every SIGINT/SIGTERM/SIGHUP/SIGQUIT fdl receives is forwarded to
  that whole group, so ``sh -c`` scripts and their children stop too. The child
  takes the time it needs (a checkpoint on SIGTERM); once it has exited, what
  is left of its group gets a moment, then SIGKILL, and fdl returns only when
  none of it runs.

The exit status is the child's; a child killed by signal N gives 128 + N.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

TYPE_CHECKING = False  # annotations only: a replayed command imports this module (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from types import FrameType

__all__ = ["FORWARDED", "has_terminal", "run_foreground"]

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SI_KERNEL = 0x80  # si_code of signals the kernel sends (terminal keys, hang-up)
_POLL = 0.5


def has_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def _spawn(
    argv: Sequence[str], cwd: str | Path | None, env: Mapping[str, str] | None, share: bool
) -> subprocess.Popen[bytes]:
    kwargs: dict[str, object] = {}
    if not share:
        if sys.version_info >= (3, 11):
            kwargs["process_group"] = 0
        else:  # pragma: no cover - Python 3.10
            kwargs["preexec_fn"] = os.setpgrp
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        list(argv), cwd=cwd, env=dict(env) if env is not None else None, **kwargs
    )


def _forward(proc: subprocess.Popen[bytes], signum: int, share: bool) -> None:
    try:
        if share:
            os.kill(proc.pid, signum)
        else:
            os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run_foreground(
    argv: Sequence[str], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None
) -> int:
    """Run ``argv`` attached to this terminal; forward signals; return its exit status.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    share = has_terminal()
    if threading.current_thread() is not threading.main_thread():
        proc = _spawn(argv, cwd, env, share)
        return _status(proc.wait())
    pending: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    # Signals fdl was told to ignore (nohup) stay ignored, for fdl and the child.
    watched = [sig for sig in FORWARDED if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, remember) for sig in watched}
    try:
        proc = _spawn(argv, cwd, env, share)
        if hasattr(signal, "sigtimedwait"):
            _wait_linux(proc, share, pending, watched)
        else:  # pragma: no cover - macOS has no sigtimedwait
            _wait_portable(proc, share, pending)
        return _status(proc.returncode)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _drain(proc: subprocess.Popen[bytes], share: bool, pending: list[int]) -> None:
    while pending:
        _forward(proc, pending.pop(0), share)


def _running(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child runs, without reaping it: its zombie keeps its process group's id
    from being taken while what it left in the group is ended."""
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


def _wait_linux(
    proc: subprocess.Popen[bytes], share: bool, pending: list[int], forwarded: Sequence[int]
) -> None:
    """Wait with the signals blocked and taken synchronously, so their origin is known.

    Once the child has exited after a signal fdl forwarded to its group, the rest of the
    group gets a moment, then SIGKILL; fdl returns when none of it runs."""
    watched = {*forwarded, signal.SIGCHLD}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    signalled = bool(pending)
    try:
        _drain(proc, share, pending)
        while _running(proc):
            info = signal.sigtimedwait(watched, _POLL)
            signalled = signalled or bool(pending)
            _drain(proc, share, pending)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            if share and info.si_code == SI_KERNEL:
                continue  # from the terminal: the child, in our group, got it too
            signalled = True
            _forward(proc, info.si_signo, share)
        if signalled and not share:
            from fdl._group import end_group

            end_group(proc.pid, first=None)
        proc.wait()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _wait_portable(
    proc: subprocess.Popen[bytes], share: bool, pending: list[int]
) -> None:  # pragma: no cover - used where sigtimedwait is missing
    while True:
        try:
            proc.wait(timeout=_POLL)
            return
        except subprocess.TimeoutExpired:
            pass
        while pending:
            signum = pending.pop(0)
            if not (share and signum == signal.SIGINT):
                _forward(proc, signum, share)
