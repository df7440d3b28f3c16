"""Run one program in a process group of its own and measure it (a benchmark round).

The wall time is taken around the program; its CPU time (user + system) is what the
kernel accounted to it and to every descendant it waited for (``os.wait4``'s resource
usage), so a round's figure does not count what other processes on a shared machine
used. The program gets its own process group; whatever it leaves in that group is
ended when it exits, when its time limit passes, and when fdl is interrupted, so no
round leaves processes behind (re-parented to PID 1).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from fdl._group import end_group

__all__ = ["OUTPUT_LIMIT", "Outcome", "end_group", "measure"]


class Outcome(NamedTuple):
    """How a measured program ended (``fdl.runner.Measured`` is built from it)."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    user_s: float
    system_s: float
    timed_out: bool


# The most of a round's output kept (its end, where figures are printed last).
OUTPUT_LIMIT = 16 << 20


def _tail(stream: IO[bytes]) -> str:
    stream.flush()
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - OUTPUT_LIMIT))
    return stream.read().decode("utf-8", errors="replace")


def measure(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Outcome:
    """Run ``argv`` to completion in a new process group; its output, status and costs.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    args = [str(a) for a in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            end_group(proc.pid)

        timer = threading.Timer(timeout, expire) if timeout is not None else None
        reaped = False
        try:
            if timer is not None:
                timer.daemon = True
                timer.start()
            # Wait for the exit without reaping: the zombie keeps the group's id taken
            # while what it left in the group is ended, so no other process gets it.
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            wall = time.perf_counter() - start
            end_group(proc.pid, grace=0.5)
            _, status, usage = os.wait4(proc.pid, 0)
            reaped = True
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if timer is not None:
                timer.cancel()
            if not reaped:  # Ctrl-C, SIGTERM, an error: end the round's whole group
                end_group(proc.pid)
                proc.wait()
        return Outcome(
            proc.returncode,
            _tail(out),
            _tail(err),
            wall,
            usage.ru_utime,
            usage.ru_stime,
            expired.is_set(),
        )
