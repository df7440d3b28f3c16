"""Ending a child's process group, and knowing that it has ended.

A signal is delivered when its target next runs: on a loaded machine a process sent
SIGKILL can stay in the process table, running, for a while after ``kill`` returned. So
ending a group waits (bounded) until nothing in it runs any more (a zombie has ended; its
new parent reaps it), and fdl exits only after that: "nothing left running" holds at the
moment fdl is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

__all__ = [
    "GRACE_S",
    "KILL_WAIT_S",
    "HeldSignals",
    "alive",
    "end_group",
    "kill_group",
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


class HeldSignals:
    """SIGINT and SIGTERM held while a child is started, then delivered.

    fdl's handlers raise (``Interrupted``, ``Terminated``); one that ran inside
    ``subprocess.Popen``, after the fork but before the caller holds the child's pid, would
    end fdl with the child left running (a child that signals fdl at once shows it). So the
    caller holds them before it starts the child and calls :meth:`release` first thing
    inside the ``try`` whose ``finally`` ends the child's group: a held signal is raised
    again there. Outside the main thread (where signals are not handled) it holds nothing.
    """

    __slots__ = ("_held", "_previous")

    def __init__(self) -> None:
        self._held: list[int] = []
        self._previous: dict[int, object] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(sig)
            if handler is None:  # set outside Python: it cannot be put back
                continue
            try:
                signal.signal(sig, self._remember)
            except ValueError:  # not the main thread
                break
            self._previous[sig] = handler

    def _remember(self, signum: int, _frame: object) -> None:
        self._held.append(signum)

    def release(self) -> None:
        """Put the handlers back and raise again what arrived meanwhile (once each)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous = {}
        held, self._held = dict.fromkeys(self._held), []
        for sig in held:
            signal.raise_signal(sig)
