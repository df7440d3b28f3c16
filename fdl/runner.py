"""The one choke point for running external programs.

Everything fdl runs (nvcc, cmake, docker, git, pip, the project's commands)
goes through a :class:`Runner`. The real one is :class:`SubprocessRunner`;
tests use ``tests.support.fakes.FakeRunner``, which records calls and answers from a table.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from fdl._group import done, start
from fdl.errors import CommandFailed, EnvironmentProblem

__all__ = [
    "Completed",
    "Measured",
    "Runner",
    "SubprocessRunner",
    "default_runner",
    "missing_program",
]

TAIL_LINES = 40
LineCallback = Callable[[str], None]


@dataclass
class Completed:
    """The result of a finished command."""

    argv: list[str]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass
class Measured(Completed):
    """A finished command with what it cost: wall time, and the CPU time (user and
    system) of its process tree as the kernel counted it (``wait4``)."""

    wall_s: float = 0.0
    user_s: float = 0.0
    system_s: float = 0.0
    timed_out: bool = False

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


class Runner(Protocol):
    """Runs programs. ``check=True`` raises :class:`CommandFailed` on failure."""

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        timeout: float | None = None,
        input: str | None = None,
        max_output: int | None = None,
    ) -> Completed:
        """Run to completion, capturing stdout and stderr as text.

        With ``max_output`` (bytes of stdout and stderr together) the program runs in a
        process group of its own; printing more, or outliving ``timeout``, ends the whole
        group at once (no wait for a child that keeps a pipe open) and raises
        :class:`CommandFailed`, so what a program prints cannot fill memory or hang fdl.
        """
        ...

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log_file: Path | None = None,
        on_line: LineCallback | None = None,
        check: bool = True,
    ) -> Completed:
        """Run, passing each output line (stdout and stderr merged) to ``on_line``
        and to ``log_file``; the result keeps the last lines as ``stdout``."""
        ...

    def measure(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Measured:
        """Run to completion in a process group of its own, capturing its output, and
        measure it. The group is ended on every exit: when the program ends (what it
        left running), at ``timeout`` (``timed_out``), and on Ctrl-C/SIGTERM of fdl."""
        ...

    def interactive(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> int:
        """Run attached to the terminal (stdin, stdout, stderr inherited, not captured),
        forwarding SIGINT/SIGTERM/SIGHUP/SIGQUIT; return the exit status
        (128 + N when the program was killed by signal N)."""
        ...

    def which(self, program: str) -> str | None:
        """The full path of ``program`` on PATH, or None."""
        ...


def missing_program(program: str) -> EnvironmentProblem:
    """The error for a program that is not on PATH (shared with the test doubles)."""
    return EnvironmentProblem(
        f"`{program}` was not found on PATH",
        hint=f"install {program}, or add its directory to PATH",
    )


class SubprocessRunner:
    """The real runner, on :mod:`subprocess`."""

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        timeout: float | None = None,
        input: str | None = None,
        max_output: int | None = None,
    ) -> Completed:
        args = [str(a) for a in argv]
        if max_output is not None:
            result = _run_bounded(args, cwd, env, timeout, input, max_output)
        else:
            result = _run_captured(args, cwd, env, timeout, input)
        if check and result.returncode != 0:
            tail = "\n".join((result.stderr or result.stdout).splitlines()[-TAIL_LINES:])
            raise CommandFailed(args, result.returncode, output_tail=tail)
        return result

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log_file: Path | None = None,
        on_line: LineCallback | None = None,
        check: bool = True,
    ) -> Completed:
        args = [str(a) for a in argv]
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        log: IO[str] | None = None
        if log_file is not None:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            # Line-buffered: `tail -f` on a long build log shows it as it happens.
            log = log_file.open("a", encoding="utf-8", buffering=1)
        try:
            own_group = _own_group()
            proc = _start(
                args,
                cwd,
                env,
                own_group,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                bufsize=1,
            )
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    text = line.rstrip("\n")
                    tail.append(text)
                    if log is not None:
                        log.write(line)
                    if on_line is not None:
                        on_line(text)
                returncode = proc.wait()
                done(proc)
            except BaseException:
                _terminate(proc, own_group)
                raise
        finally:
            if log is not None:
                log.close()
        result = Completed(args, returncode, "\n".join(tail))
        if check and returncode != 0:
            raise CommandFailed(args, returncode, output_tail=result.stdout, log_file=log_file)
        return result

    def measure(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Measured:
        from fdl._measure import measure

        args = [str(a) for a in argv]
        try:
            done = measure(args, cwd=cwd, env=env, timeout=timeout)
        except FileNotFoundError:
            raise missing_program(args[0]) from None
        return Measured(args, **done._asdict())  # the Outcome's fields are Measured's

    def interactive(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> int:
        from fdl._foreground import run_foreground

        args = [str(a) for a in argv]
        try:
            return run_foreground(args, cwd=cwd, env=env)
        except FileNotFoundError:
            raise missing_program(args[0]) from None

    def which(self, program: str) -> str | None:
        import shutil  # bz2, lzma: only to look a program up

        return shutil.which(program)


def _own_group() -> bool:
    """Whether a program fdl waits for gets a process group of its own: without a terminal
    (whose Ctrl-C reaches fdl's whole group), so that it is ended with all its children on a
    timeout or when fdl is stopped (SIGTERM, SIGINT arrive as exceptions); subprocess.run
    would kill the program alone and leave its children."""
    from fdl._foreground import has_terminal

    return not has_terminal()


def _start(
    args: list[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    own_group: bool,
    **streams: Any,
) -> subprocess.Popen[Any]:
    """Start ``args`` (in a group of its own with ``own_group``), stopped with
    :func:`_terminate` when fdl is; a program not on PATH is :func:`missing_program`."""
    try:
        return start(
            lambda: subprocess.Popen(
                args,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=own_group,
                **streams,
            ),
            lambda child: _terminate(child, own_group),
        )
    except FileNotFoundError:
        raise missing_program(args[0]) from None


def _run_captured(
    args: list[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    input: str | None,
) -> Completed:
    """``run`` without a bound on the output: ``communicate``, with the timeout."""
    own_group = _own_group()
    proc = _start(
        args,
        cwd,
        env,
        own_group,
        stdin=subprocess.PIPE if input is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _terminate(proc, own_group)
        raise CommandFailed(
            args, -1, message=f"`{' '.join(args)}` did not finish within {timeout:g} s"
        ) from None
    except BaseException:
        _terminate(proc, own_group)
        raise
    done(proc)
    return Completed(args, proc.returncode, stdout, stderr)


_EXITED_GRACE = 0.5  # seconds the pipes may stay open once the program has exited


def _run_bounded(
    args: list[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    input: str | None,
    limit: int,
) -> Completed:
    """``run`` with a bound on time and on what is kept of the output (see Runner.run)."""
    import selectors
    import signal
    import time

    from fdl._group import wait_ended

    proc = _start(
        args,
        cwd,
        env,
        True,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = None if timeout is None else time.monotonic() + timeout
    buffers: dict[int, bytearray] = {}
    problem = ""
    # Once the program has exited, what it printed is in the pipes; a child it left behind
    # (`sleep 300 &`) may hold them open for ever: read on for a moment, then stop.
    grace: float | None = None
    try:
        if input is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):  # a child that exits without reading it
                proc.stdin.write(input.encode())
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with selectors.DefaultSelector() as selector:
            for stream in (proc.stdout, proc.stderr):
                assert stream is not None
                buffers[stream.fileno()] = bytearray()
                selector.register(stream, selectors.EVENT_READ)
            while selector.get_map() and not problem:
                now = time.monotonic()
                if grace is None and proc.poll() is not None:
                    grace = now + _EXITED_GRACE
                if grace is not None and now >= grace:
                    break
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    problem = f"`{' '.join(args)}` did not finish within {timeout:g} s"
                    break
                wait = min(
                    x for x in (left, 0.1 if grace is None else grace - now, 0.1) if x is not None
                )
                for key, _ in selector.select(wait):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    buffers[key.fd] += chunk
                    if sum(len(b) for b in buffers.values()) > limit:
                        problem = f"`{' '.join(args)}` printed more than {limit} bytes"
                        break
        if not problem:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            try:
                proc.wait(left)
            except subprocess.TimeoutExpired:
                problem = f"`{' '.join(args)}` did not finish within {timeout:g} s"
    finally:
        # The whole group, always: the program's children too, even once it has exited
        # (and on an interrupt or SIGTERM of fdl, which arrive here as exceptions); fdl
        # goes on once none of them runs (a killed process may run on for a moment).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_ended(proc.pid)
        done(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if problem:
        raise CommandFailed(args, -1, message=problem)
    out, err = (bytes(buffer).decode(errors="replace") for buffer in buffers.values())
    return Completed(args, proc.returncode, out, err)


def _terminate(proc: subprocess.Popen[Any], own_group: bool = False) -> None:
    """Stop a child that we are abandoning (interrupt or error): its whole group when it has
    one of its own (SIGTERM, SIGKILL after a moment; returns once none of it runs)."""
    done(proc)
    if own_group:
        from fdl._group import end_group

        end_group(proc.pid)
        proc.wait()
        return
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_DEFAULT: list[Runner] = []


def default_runner() -> Runner:
    """The process-wide runner (tests may replace it with ``set_default_runner``)."""
    if not _DEFAULT:
        _DEFAULT.append(SubprocessRunner())
    return _DEFAULT[0]


def set_default_runner(runner: Runner) -> None:
    """Replace the process-wide runner (for tests)."""
    _DEFAULT[:] = [runner]


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment with ``extra`` applied (values of None removed)."""
    env = dict(os.environ)
    if extra:
        env.update(extra)
    return env
