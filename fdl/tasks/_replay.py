"""A project command's plan, kept after a real run and replayed by the next identical one.

``fdl <command>`` plans before it runs: the session, the manifest's layers, the resolver,
the active libtorch, the compose file, the docker probes' memory (about 40 ms of imports
and work). The plan is a function of what planning read, so a run that read the same
things gets the same plan. While a run plans (:func:`record_plan`), every file-system question
Python's code asks is recorded: ``open``, ``os.listdir`` and ``os.scandir`` (audit
events) and ``os.stat``/``lstat``/``access``/``readlink`` (wrapped for the time), each
path with its stat signature (device, inode, mode, size, mtime, ctime: an absent file is
a dependency too, and a directory's signature changes when an entry is added or removed).
When the plan is ready to run (:func:`keep_plan`), it is kept in ``<cache>/plans/`` with those
signatures and those of fdl's own modules, under a key of the command line, the working
directory, the whole environment (a digest: values are not written), fdl's and Python's
versions, the user, the host name and which of stdin/stdout/stderr are terminals.

:func:`replay_plan` answers the next run when the key is the same and every signature still
is: the recorded messages (the plan's notes) are written again byte for byte, and the
same argv runs in the same directory with the same environment, through the same
foreground runner (signals forwarded, the group ended and reaped). Nothing else of the
planner is imported.

Any doubt is the normal path. Nothing is kept when planning ran a program or touched the
network or a native library (a probe), read ``/proc``, ``/sys`` or a device, changed
directory or the environment, or asked by file descriptor; when a file it read changed
while it planned (the first run after an edit writes the parse cache: the next run keeps
the plan); when the command is not a plain ``run:`` (entries and presets), builds (cargo
or CMake: their checks ask rustc), or has an image to build first; or when anything was
written to stdout. A damaged, foreign, linked or FIFO entry is a miss (``fdl._kept``).
``FDL_PLAN_CACHE=0`` turns it off.
"""

from __future__ import annotations

import os
import stat
import sys

from fdl import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

    from fdl.tasks._plan import CommandPlan

__all__ = ["keep_plan", "record_plan", "replay_plan", "stop_recording"]

FORMAT = 1
_LIMIT = 256 << 10
_ENTRIES = 64
# events of a planning run that make its plan depend on more than the files it read
_TAINTS = frozenset(
    {
        "subprocess.Popen",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.chdir",
        "os.putenv",
        "os.unsetenv",
        "socket.connect",
        "socket.getaddrinfo",
        "ctypes.dlopen",
        "urllib.Request",
    }
)
_KERNEL = ("/proc/", "/sys/", "/dev/")

_STAT, _LSTAT = os.stat, os.lstat


# how a path was asked: lstat, stat, or read (opened, listed)
_LINK, _FOLLOW, _READ = 0, 1, 2


def _signature(path: str, kind: int) -> tuple[int, ...] | None:
    """What a run that asked ``path`` this way saw of it: a directory that was only
    stat'ed (a step of a path resolved, an ``is_dir``) by its identity, since its entries
    are dependencies of their own; a file, or a directory read, by its times and size too."""
    try:
        info = _LSTAT(path) if kind == _LINK else _STAT(path)
    except (OSError, ValueError):
        return None
    if kind != _READ and stat.S_ISDIR(info.st_mode):
        return (info.st_mode, info.st_dev, info.st_ino)
    return (
        info.st_mode, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns
    )  # fmt: skip


def _cache_dir(environ: Mapping[str, str]) -> str | None:
    """fdl's cache directory in the cases :func:`fdl.paths.cache_dir` answers without
    platformdirs (None otherwise: no replay); tests/cli/test_plan_replay.py holds them
    equal."""
    value = environ.get("FDL_CACHE_DIR")
    if value:
        return os.path.expanduser(value)
    if sys.platform != "linux" or "ANDROID_DATA" in environ:
        return None
    xdg, home = environ.get("XDG_CACHE_HOME", ""), environ.get("HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "fdl")
    if not xdg and home.startswith("/"):
        return os.path.join(home, ".cache", "fdl")
    return None


def _entry(args: Sequence[str]) -> tuple[str, tuple[object, ...]] | None:
    """The entry's file and the key a kept plan must have been made for."""
    environ = os.environ
    if environ.get("FDL_PLAN_CACHE", "1") == "0":
        return None
    folder = _cache_dir(environ)
    if folder is None:
        return None
    import zlib

    try:
        cwd = os.getcwd()
        ttys = tuple(os.isatty(fd) for fd in (0, 1, 2))
    except OSError:
        return None
    text = "\0".join(f"{name}={value}" for name, value in sorted(environ.items()))
    data = text.encode("utf-8", "surrogateescape")
    where = "\0".join([cwd, *args]).encode("utf-8", "surrogateescape")
    key = (
        FORMAT, __version__, sys.version, sys.executable, cwd, tuple(args),
        (len(data), zlib.crc32(data), zlib.adler32(data)),
        os.getuid(), os.getgid(), os.uname().nodename, ttys,
    )  # fmt: skip
    name = f"{zlib.crc32(where):08x}{key[6][1]:08x}.marshal"  # a file per place and environment
    return os.path.join(folder, "plans", name), key


# --- recording a planning run ---------------------------------------------------------------


class _Recorder:
    """What one planning run asked of the file system, and whether anything else."""

    def __init__(self, args: Sequence[str], stderr: TextIO, stdout: TextIO) -> None:
        self.args = list(args)
        self.cwd = os.getcwd()
        self.seen: dict[tuple[str, int], tuple[int, ...] | None] = {}
        self.tainted = False
        self.said: list[str] = []
        self.stdout_written = False
        self.stderr, self.stdout = stderr, stdout
        self.system: tuple[TextIO, TextIO] = (sys.stderr, sys.stdout)

    def note(self, path: object, kind: int = _READ) -> None:
        if isinstance(path, int) or path is None:
            return  # a descriptor: its file was recorded when it was opened by name
        try:
            name = os.fsdecode(os.fspath(path))  # type: ignore[call-overload]
        except TypeError:
            self.tainted = True
            return
        name = os.path.normpath(os.path.join(self.cwd, name))
        if name.startswith(_KERNEL) and name != "/dev/null":
            self.tainted = True
        if (name, kind) not in self.seen:
            self.seen[(name, kind)] = _signature(name, kind)


_recording: _Recorder | None = None
_hooked = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    recorder = _recording
    if recorder is None:
        return
    if event == "open":
        recorder.note(args[0])
    elif event in ("os.listdir", "os.scandir"):
        recorder.note(args[0] if args[0] is not None else ".")
    elif event in _TAINTS:
        recorder.tainted = True


def _wrapped(original: Any, follow: bool) -> Any:
    def call(path: Any, *rest: Any, **options: Any) -> Any:
        recorder = _recording
        if recorder is not None:
            if options.get("dir_fd") is not None:
                recorder.tainted = True
            recorder.note(
                path, _FOLLOW if follow and options.get("follow_symlinks", True) else _LINK
            )
        return original(path, *rest, **options)

    return call


_ORIGINALS = {"stat": os.stat, "lstat": os.lstat, "access": os.access, "readlink": os.readlink}


class _Tee:
    """A console stream that also keeps what was written to it."""

    def __init__(self, stream: TextIO, sink: list[str] | None, recorder: _Recorder) -> None:
        self._stream, self._sink, self._recorder = stream, sink, recorder

    def write(self, text: str) -> int:
        if self._sink is None:
            self._recorder.stdout_written = True
        else:
            self._sink.append(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def record_plan(args: Sequence[str], console: Any) -> None:
    """Record what planning ``fdl ARGS`` asks (fdl's own process only: the os functions
    are wrapped until :func:`keep_plan` or :func:`stop_recording`), and what ``console`` writes."""
    global _recording, _hooked
    if _entry(args) is None:
        return
    recorder = _Recorder(args, console.stderr, console.stdout)
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    for name, original in _ORIGINALS.items():
        setattr(os, name, _wrapped(original, name in ("stat", "access")))
    console.stderr = sys.stderr = _Tee(recorder.stderr, recorder.said, recorder)
    console.stdout = sys.stdout = _Tee(recorder.stdout, None, recorder)
    _recording = recorder


def stop_recording(console: Any) -> _Recorder | None:
    """Stop recording (the os functions and the console's streams back as they were)."""
    global _recording
    recorder, _recording = _recording, None
    if recorder is None:
        return None
    for name, original in _ORIGINALS.items():
        setattr(os, name, original)
    console.stderr, console.stdout = recorder.stderr, recorder.stdout
    sys.stderr, sys.stdout = recorder.system
    return recorder


def keep_plan(plan: CommandPlan, environ: Mapping[str, str], console: Any) -> None:
    """The plan about to run, kept for the next identical run when nothing but files went
    into it (see the module's text); recording stops either way."""
    recorder = stop_recording(console)
    if recorder is None or recorder.tainted or recorder.stdout_written:
        return
    if plan.kind != "run" or (plan.docker is not None and plan.docker.profile is not None):
        return
    from fdl.tasks._framework_env import build_tools

    if build_tools(plan.script):
        return
    found = _entry(recorder.args)
    if found is None or found[1][4] != recorder.cwd:
        return
    deps = []
    for (path, kind), before in recorder.seen.items():
        if _signature(path, kind) != before:
            return  # changed while it planned (fdl wrote it): the next run keeps it
        deps.append((path, kind, before))
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if (name == "fdl" or name.startswith("fdl.")) and isinstance(source, str):
            deps.append((source, _READ, _signature(source, _READ)))
    base = dict(os.environ)
    final = plan.environ(environ)
    value = (
        tuple(deps),
        tuple(plan.argv),
        str(plan.cwd),
        _diff(base, environ),
        _diff(base, final),
        "".join(recorder.said),
        tuple(plan.docker.compose) if plan.docker is not None and plan.docker.remembered else None,
    )
    from pathlib import Path

    from fdl._kept import keep

    keep(Path(found[0]), found[1], value, limit=_LIMIT, max_entries=_ENTRIES)


def _diff(
    base: Mapping[str, str], changed: Mapping[str, str]
) -> tuple[tuple[str, str | None], ...]:
    made: list[tuple[str, str | None]] = [
        (name, value) for name, value in changed.items() if base.get(name) != value
    ]
    return (*made, *((name, None) for name in base if name not in changed))


def _applied(base: Mapping[str, str], diff: Any) -> dict[str, str]:
    env = dict(base)
    for name, value in diff:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# --- replaying -----------------------------------------------------------------------------


def replay_plan(args: Sequence[str], console: Any) -> int | None:
    """Run ``fdl ARGS`` from its kept plan and return the exit status; None when there is
    no kept plan for this run or anything it depended on has changed (then plan as usual).

    Raises:
        EnvironmentProblem: the program is missing (as the planned run says), or compose
            failed and docker now answers otherwise (fdl.tasks.recheck_engine).
    """
    found = _entry(args)
    if found is None:
        return None
    from fdl._kept import kept

    value: Any = kept(found[0], found[1], limit=_LIMIT)  # type: ignore[arg-type]
    try:
        deps, argv, cwd, base_diff, final_diff, said, compose = value
        for path, kind, signature in deps:
            if _signature(path, kind) != signature:
                return None
        base = dict(os.environ)
        environ, env = _applied(base, base_diff), _applied(base, final_diff)
        argv = [str(part) for part in argv]
        if not argv or not isinstance(cwd, str) or not isinstance(said, str):
            return None
    except (TypeError, ValueError):  # none kept, or not in this shape
        return None
    if said:
        console.stderr.write(said)
        console.stderr.flush()
    from fdl._foreground import run_foreground

    try:
        status = run_foreground(argv, cwd=cwd, env=env)
    except FileNotFoundError:
        from fdl.runner import missing_program

        raise missing_program(argv[0]) from None
    if compose is not None and 0 < status < 128:
        from fdl.tasks._docker import recheck_engine

        changed = recheck_engine(list(compose), environ)
        if changed:
            console.note(changed)
    return status
