"""Answers kept with the signatures of everything that went into them, and given again by
the next identical run when none has changed (issue 44: start-up beside Python's own).

While a command works out its answer (:func:`record`), every file-system question
Python's code asks is recorded: ``open``, ``os.listdir`` and ``os.scandir`` (audit
events) and ``os.stat``/``lstat``/``access``/``readlink`` (wrapped for the time), each
path with its stat signature (a file by device, inode, mode, size, mtime and ctime; a
directory only stat'ed, as a step of a path, by its identity; a directory listed by its
times too, which change when an entry is added or removed; an absent path is a
dependency as well), and what it writes to stdout and stderr. The answer is kept
(:func:`keep`) in ``<cache>/plans/`` with those signatures and those of fdl's own
modules, under a key of the command line, the working directory, the whole environment
(a digest: no value is written), fdl's and Python's versions, the user and groups, the
host name and which of stdin/stdout/stderr are terminals. :func:`kept_answer` gives it back when the key
is the same and every signature still is.

Two kinds use it: ``config show``/``config explain`` and a project command's ``--dry-run``
keep what they wrote (:func:`replay_output`), a project command the plan it ran
(fdl.tasks: argv, directory, environment, its notes), replayed without importing the
manifest or the planner.

Any doubt is the normal path. Nothing is kept when the run asked a program or the network
or loaded a native library (a probe), read ``/proc``, ``/sys`` or a device, changed
directory or the environment, or asked relative to a directory descriptor; or when a file
it read changed while it ran (the first run after an edit writes the parse cache: the
next run keeps its answer). A damaged, foreign, linked or FIFO entry is a miss
(``fdl._kept``). ``FDL_PLAN_CACHE=0`` turns it off.
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

__all__ = [
    "Recorder",
    "entry",
    "keep",
    "keep_output",
    "kept_answer",
    "kept_tagged",
    "record",
    "recording",
    "replay_output",
    "stop",
    "write_output",
]

FORMAT = 1
OUTPUT = "output"  # the kind of a kept answer that is what a run wrote
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


def entry(args: Sequence[str]) -> tuple[str, tuple[object, ...]] | None:
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
        os.getuid(), os.getgid(), tuple(os.getgroups()), os.uname().nodename, ttys,
    )  # fmt: skip
    name = f"{zlib.crc32(where):08x}{key[6][1]:08x}.marshal"  # a file per place and environment
    return os.path.join(folder, "plans", name), key


# --- recording a planning run ---------------------------------------------------------------


class Recorder:
    """What one planning run asked of the file system, and whether anything else."""

    def __init__(self, args: Sequence[str], stderr: TextIO, stdout: TextIO) -> None:
        self.args = list(args)
        self.cwd = os.getcwd()
        self.seen: dict[tuple[str, int], tuple[int, ...] | None] = {}
        self.tainted = False
        self.said: list[str] = []  # stderr
        self.out: list[str] = []  # stdout
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


_recording: Recorder | None = None
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

    def __init__(self, stream: TextIO, sink: list[str]) -> None:
        self._stream, self._sink = stream, sink

    def write(self, text: str) -> int:
        self._sink.append(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def record(args: Sequence[str], console: Any) -> None:
    """Record what planning ``fdl ARGS`` asks (fdl's own process only: the os functions
    are wrapped until :func:`stop`), and what ``console`` writes."""
    global _recording, _hooked
    if entry(args) is None:
        return
    recorder = Recorder(args, console.stderr, console.stdout)
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    for name, original in _ORIGINALS.items():
        setattr(os, name, _wrapped(original, name in ("stat", "access")))
    console.stderr = sys.stderr = _Tee(recorder.stderr, recorder.said)
    console.stdout = sys.stdout = _Tee(recorder.stdout, recorder.out)
    _recording = recorder


def stop(console: Any) -> Recorder | None:
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


def keep(console: Any, tag: str, payload: tuple[object, ...]) -> None:
    """Keep ``payload`` (``tag``: what kind of answer) for the recorded run, when nothing
    but files went into it; recording stops either way."""
    recorder = stop(console)
    if recorder is None or recorder.tainted:
        return
    found = entry(recorder.args)
    if found is None or found[1][4] != recorder.cwd:
        return
    deps = []
    for (path, kind), before in recorder.seen.items():
        if _signature(path, kind) != before:
            return  # changed while it ran (fdl wrote it): the next run keeps it
        deps.append((path, kind, before))
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if (name == "fdl" or name.startswith("fdl.")) and isinstance(source, str):
            deps.append((source, _READ, _signature(source, _READ)))
    from pathlib import Path

    from fdl._kept import keep as keep_entry

    value = (tag, tuple(deps), payload)
    keep_entry(Path(found[0]), found[1], value, limit=_LIMIT, max_entries=_ENTRIES)


def kept_answer(args: Sequence[str], tag: str) -> tuple[Any, ...] | None:
    """The payload kept for ``fdl ARGS`` of kind ``tag`` while everything it depended on is
    as it was; else None."""
    found = kept_tagged(args)
    return found[1] if found is not None and found[0] == tag else None


def kept_tagged(args: Sequence[str]) -> tuple[str, tuple[Any, ...]] | None:
    """The kind and payload kept for ``fdl ARGS`` while everything it depended on is as it
    was; else None."""
    found = entry(args)
    if found is None:
        return None
    from fdl._kept import kept

    value: Any = kept(found[0], found[1], limit=_LIMIT)  # type: ignore[arg-type]
    try:
        kind, deps, payload = value
        if not isinstance(kind, str) or not isinstance(payload, tuple):
            return None
        for path, how, signature in deps:
            if _signature(path, how) != signature:
                return None
    except (TypeError, ValueError):  # none kept, or not in this shape
        return None
    return kind, payload


def replay_output(args: Sequence[str], console: Any) -> int | None:
    """``fdl ARGS`` answered from what its last identical run wrote (stdout, stderr and
    exit status); None when nothing is kept or anything it read has changed."""
    payload = kept_answer(args, OUTPUT)
    return None if payload is None else write_output(payload, console)


def write_output(payload: tuple[Any, ...], console: Any) -> int | None:
    """What a kept ``output`` payload says was written, written again; its exit status
    (None for a payload not of that shape)."""
    if len(payload) != 3:
        return None
    out, err, code = payload
    if not (isinstance(out, str) and isinstance(err, str) and isinstance(code, int)):
        return None
    console.stdout.write(out)
    console.stdout.flush()
    console.stderr.write(err)
    console.stderr.flush()
    return code


def recording() -> Recorder | None:
    """The run being recorded, if one is."""
    return _recording


def keep_output(console: Any, code: int) -> None:
    """What the recorded run wrote, and its exit status, kept for the next identical run."""
    recorder = _recording
    if recorder is None:
        return
    keep(console, OUTPUT, ("".join(recorder.out), "".join(recorder.said), code))
