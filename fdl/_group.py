"""Ending a child's process group, and knowing that it has ended.

A signal is delivered when its target next runs: on a loaded machine a process sent
SIGKILL can stay in the process table, running, for a while after ``kill`` returned. So
ending a group waits (bounded) until nothing in it runs any more (a zombie has ended; its
new parent reaps it), and fdl exits only after that: "nothing left running" holds at the
moment fdl is gone.
"""

from __future__ import annotations

import _thread  # threading's lock without threading's import (start-up)
import contextlib
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

__all__ = [
    "GRACE_S",
    "KILL_WAIT_S",
    "alive",
    "done",
    "end_group",
    "hold_or_raise",
    "kill_group",
    "start",
    "stop_all",
    "wait_ended",
]

# How long the group gets between SIGTERM and SIGKILL.
GRACE_S = 2.0
# How long processes sent SIGKILL get to leave (one in uninterruptible sleep, on a dead NFS
# server, may never: fdl then exits anyway).
KILL_WAIT_S = 10.0


def alive(pgid: int) -> bool:
    """Whether a process of the group is still running (a zombie is not)."""
    try:
        os.killpg(pgid, 0)  # cheap, zombies included: the common "nothing at all" answer
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: what the kernel said
        return True
    wanted = str(pgid).encode()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after "(comm)": state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == wanted and fields[0] not in (b"Z", b"X"):
            return True
    return False


def wait_ended(pgid: int, seconds: float = KILL_WAIT_S) -> bool:
    """Wait (at most ``seconds``) until nothing in the group runs; whether it ended."""
    deadline = time.monotonic() + seconds
    pause = 0.002
    while alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True


def end_group(
    pgid: int, grace: float = GRACE_S, *, first: signal.Signals | None = signal.SIGTERM
) -> None:
    """End what runs in the process group: ``first`` (SIGTERM; None when it was sent
    already), then SIGKILL what is left after ``grace``, then wait until it is gone.

    The group's leader should not be reaped before (a zombie leader keeps the group's id
    from being taken by another process)."""
    if not alive(pgid):
        return
    if first is not None:
        try:
            os.killpg(pgid, first)
        except (ProcessLookupError, PermissionError):
            return
    if wait_ended(pgid, grace):
        return
    kill_group(pgid)


def kill_group(pgid: int) -> None:
    """SIGKILL the process group and wait (bounded) until nothing in it runs."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    wait_ended(pgid)


# --- starting a child: fdl's stop signals held until its pid is known ------------------
# SIGINT and SIGTERM reach fdl as exceptions (raised by the CLI's handlers). One raised
# inside ``subprocess.Popen``, after the fork but before Popen returns (a child that
# signals at once, or a user's Ctrl-C then), leaves a running child no ``finally`` knows
# of. So while the main thread starts a child, the handlers hold the signal; it is raised
# once the child has been stopped. And every child started so is kept until its caller
# is done with it (:func:`done`): one a signal caught between ``start`` returning and the
# caller's ``try`` is stopped by :func:`stop_all`, which the CLI calls on its way out.
_starting = [0]
_held: list[BaseException] = []
_live: dict[int, Callable[[], None]] = {}
_live_lock = _thread.allocate_lock()


def hold_or_raise(stop: BaseException) -> None:
    """What fdl's SIGINT/SIGTERM handlers do with ``stop`` (Interrupted, Terminated):
    raise it, or hold it while :func:`start` starts a child."""
    if _starting[0]:
        _held.append(stop)
        return
    raise stop


def _in_main_thread() -> bool:
    # no threading module loaded: no thread but the main one was started from Python
    threading = sys.modules.get("threading")
    return threading is None or threading.current_thread() is threading.main_thread()


def start(spawn: Callable[[], T], stop: Callable[[T], None]) -> T:
    """``spawn()`` (a ``subprocess.Popen``) with fdl's stop signals held until it has
    returned; a signal that came meanwhile is raised after ``stop(child)``. The child is
    kept for :func:`stop_all` until the caller says it is :func:`done` with it."""
    main = _in_main_thread()
    if main:  # signals are handled in the main thread only
        _starting[0] += 1
    try:
        child = spawn()
    except BaseException:
        held = _release() if main else None
        if held is not None:  # it did not start: the signal all the same
            raise held from None
        raise
    with _live_lock:
        _live[id(child)] = lambda: stop(child)
    held = _release() if main else None
    if held is not None:
        done(child)
        stop(child)
        raise held
    return child


def _release() -> BaseException | None:
    _starting[0] -= 1
    if _starting[0] or not _held:
        return None
    first = _held[0]
    _held.clear()
    return first


def done(child: object) -> None:
    """The caller of :func:`start` has finished with ``child`` (it ended, or was ended)."""
    with _live_lock:
        _live.pop(id(child), None)


def stop_all() -> None:
    """Stop every child :func:`start` started that no caller finished with (the CLI, on
    its way out: a signal can come between ``start`` and a caller's ``try``)."""
    while True:
        with _live_lock:
            if not _live:
                return
            _, stop = _live.popitem()
        with contextlib.suppress(Exception):
            stop()
