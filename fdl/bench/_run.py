"""Run planned benchmarks: warm-up, interleaved rounds, one JSON line per round.

Every round is appended (and flushed) to the results file the moment it ends, so a run
stopped by Ctrl-C keeps every finished round and ``fdl bench report`` works on them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdl._files import read_small_text
from fdl.bench._env import capture_environment
from fdl.bench._plan import CPU, WALL, Benchmark, Side, Slot, schedule
from fdl.errors import CommandFailed, EnvironmentProblem, ManifestError
from fdl.runner import Measured, Runner, clean_environ

if TYPE_CHECKING:
    from fdl.paths import Context

__all__ = ["FORMAT", "RoundDone", "parse_figures", "prune_stale_worktrees", "run_benchmarks"]

# The version of the JSON Lines format (documented in the README). Format 2 numbers
# rounds from 1 (as the terminal does) and records each round's CPU time.
FORMAT = 2
# The longest the figure regexes may take on one round's output, all together.
FIGURE_LIMIT_S = 10.0
# Marks the scratch directory of a run's git worktrees with the pid that made it.
OWNER = ".fdl-bench-owner"


@dataclass(frozen=True)
class RoundDone:
    """Progress: one slot finished (warm-up or recorded)."""

    bench: str
    slot: Slot
    wall_s: float
    figures: Mapping[str, float]
    total: int
    index: int
    cpu_s: float = 0.0


def _last_matches(
    patterns: Mapping[str, str], output: str, limit: float
) -> tuple[dict[str, str], str | None]:
    """The last match of each regex, found in a forked child given ``limit`` seconds
    (Python's regex engine cannot be interrupted: a pattern that backtracks
    exponentially would hang fdl). Returns the matches and the pattern that ran out
    of time, if one did."""
    if not patterns:
        return {}, None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            for name, pattern in patterns.items():
                matches = re.findall(pattern, output)
                last = matches[-1] if matches else None
                data = (json.dumps([name, last if isinstance(last, str) else None]) + "\n").encode()
                while data:
                    data = data[os.write(write, data) :]
        finally:
            os._exit(0)
    os.close(write)
    buffer = b""
    finished = False
    deadline = time.monotonic() + limit
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read], [], [], remaining)
            if not ready:
                break
            chunk = os.read(read, 1 << 16)
            if not chunk:
                finished = True
                break
            buffer += chunk
    finally:
        os.close(read)
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    found: dict[str, str] = {}
    done: set[str] = set()
    for line in buffer.decode("utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError, TypeError):
            name, last = json.loads(line)
            done.add(name)
            if last is not None:
                found[name] = last
    stuck = None if finished else next((n for n in patterns if n not in done), None)
    return found, stuck


def parse_figures(
    output: str, bench: Benchmark, *, limit: float = FIGURE_LIMIT_S
) -> dict[str, float]:
    """The figures a round's output reports: the last match of each regex, and the
    numeric values of the last JSON-object line when ``json_line`` is set.

    Raises:
        ManifestError: a regex took longer than ``limit`` seconds on the output.
    """
    found: dict[str, float] = {}
    matches, stuck = _last_matches(bench.figures, output, limit)
    if stuck is not None:
        pattern = bench.figures[stuck]
        raise ManifestError(
            f"bench.{bench.name}.figures.{stuck}: {pattern!r} did not finish within "
            f"{limit:g} s on a round's output ({len(output)} characters): it backtracks",
            location=bench.where.get(stuck),
            hint=r"match the number once, anchored by the text around it, e.g. "
            r"'ms/epoch[:= ]+([0-9.]+)'; avoid a repeated group that repeats itself",
        )
    for name, text in matches.items():
        with contextlib.suppress(ValueError):
            found[name] = float(text)
    if bench.json_line:
        for line in reversed(output.splitlines()):
            text = line.strip()
            if not (text.startswith("{") and text.endswith("}")):
                continue
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):
                continue
            if isinstance(data, dict):
                for key, value in data.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        found.setdefault(str(key), float(value))
                break
    return found


def _write(fd: int, record: Mapping[str, Any]) -> None:
    """Append one record as one line, under an exclusive lock on the file: runs that
    share a results file never interleave within a line."""
    data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_stale_worktrees(runner: Runner, top: Path) -> list[Path]:
    """Remove the worktrees an earlier ``bench run`` made and could not remove (it was
    killed): those in a scratch directory whose owner file names a process that is
    gone. Only such directories are touched. Returns the worktrees removed."""
    listed = runner.run(["git", "worktree", "list", "--porcelain"], cwd=top, check=False)
    removed: list[Path] = []
    for line in listed.stdout.splitlines():
        if not line.startswith("worktree "):
            continue
        tree = Path(line.removeprefix("worktree "))
        scratch = tree.parent
        if not scratch.name.startswith("fdl-bench-"):
            continue
        owner = read_small_text(scratch / OWNER, limit=64)
        if owner is None or not owner.strip().isdigit() or _alive(int(owner.strip())):
            continue
        runner.run(["git", "worktree", "remove", "--force", str(tree)], cwd=top, check=False)
        removed.append(tree)
        if not any(p.name != OWNER for p in scratch.iterdir() if p.exists()):
            shutil.rmtree(scratch, ignore_errors=True)
    runner.run(["git", "worktree", "prune"], cwd=top, check=False)
    return removed


@contextmanager
def _worktrees(
    runner: Runner, benches: Sequence[Benchmark], cwd: Path
) -> Iterator[dict[str, tuple[Path, str]]]:
    """A detached git worktree per revision the sides name: revision -> (the project's
    directory inside it, the commit). Removed on every exit; those a killed run left
    are pruned first."""
    revisions = sorted({s.revision for b in benches for s in b.sides if s.revision})
    if not revisions:
        yield {}
        return
    top = Path(runner.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd).stdout.strip())
    inside = cwd.resolve().relative_to(top.resolve())
    prune_stale_worktrees(runner, top)
    scratch = Path(tempfile.mkdtemp(prefix="fdl-bench-"))
    (scratch / OWNER).write_text(f"{os.getpid()}\n", encoding="utf-8")
    made: list[Path] = []
    trees: dict[str, tuple[Path, str]] = {}
    try:
        for number, rev in enumerate(revisions):
            commit = runner.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=top)
            tree = scratch / str(number)
            runner.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=top)
            made.append(tree)
            trees[rev] = (tree / inside, commit.stdout.strip())
        yield trees
    finally:
        for tree in made:
            runner.run(["git", "worktree", "remove", "--force", str(tree)], cwd=top, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def variant_env(context: Context | None, name: str) -> dict[str, str]:
    """What a program needs to build and run against the installed variant ``name``
    (the same variables the task runner exports for the active one).

    Raises:
        EnvironmentProblem: the variant is not installed.
    """
    from fdl.libtorch.variants import list_variants, variant_dir

    if context is None or not (variant_dir(context, name) / "lib").is_dir():
        installed = ", ".join(list_variants(context)) if context else ""
        raise EnvironmentProblem(
            f"libtorch variant {name!r} is not installed"
            + (f" in {context.libtorch_dir}" if context else ""),
            hint=f"installed: {installed or 'none'}; install it with `fdl libtorch download` "
            "or `fdl libtorch install --from-wheel`",
        )
    path = str(variant_dir(context, name))
    inherited = clean_environ()
    ld = inherited.get("LD_LIBRARY_PATH")
    prefix = inherited.get("CMAKE_PREFIX_PATH")
    return {
        "LIBTORCH": path,
        "LIBTORCH_PATH": path,
        "Torch_DIR": f"{path}/share/cmake/Torch",
        "LD_LIBRARY_PATH": f"{path}/lib" + (f":{ld}" if ld else ""),
        "CMAKE_PREFIX_PATH": path + (f":{prefix}" if prefix else ""),
    }


def _environment(side: Side, context: Context | None) -> dict[str, str]:
    extra = variant_env(context, side.libtorch) if side.libtorch else {}
    return clean_environ({**extra, **side.env})


def _hook(
    runner: Runner,
    hook: str,
    argv: Sequence[str],
    bench: Benchmark,
    side: Side,
    cwd: Path,
    context: Context | None,
) -> None:
    """Run a side's prepare/setup/cleanup command (untimed); its failure stops the run."""
    done = runner.measure(argv, cwd=cwd, env=_environment(side, context), timeout=bench.timeout)
    if done.ok:
        return
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
    why = (
        f"did not finish within {bench.timeout:g} s"
        if done.timed_out and bench.timeout
        else f"exited with status {done.returncode}"
    )
    raise CommandFailed(
        list(argv),
        done.returncode,
        output_tail=tail,
        message=f"benchmark {bench.name}, side {side.name}: the {hook} command "
        f"`{' '.join(argv)}` {why}",
        hint=f"fix the {hook} command (bench.{bench.name}.{hook} or --{hook}), then run again",
    )


def _execute(
    runner: Runner, slot: Slot, bench: Benchmark, cwd: Path, context: Context | None = None
) -> tuple[Measured, dict[str, float]]:
    if slot.side.prepare:
        _hook(runner, "prepare", slot.side.prepare, bench, slot.side, cwd, context)
    done = runner.measure(
        slot.side.argv,
        cwd=cwd,
        env=_environment(slot.side, context),
        timeout=bench.timeout,
    )
    if not done.ok:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        phase = "warm-up round" if slot.warmup else "round"
        why = (
            f"did not finish within {bench.timeout:g} s (timeout:); its processes were ended"
            if done.timed_out and bench.timeout
            else f"exited with status {done.returncode}"
        )
        raise CommandFailed(
            list(slot.side.argv),
            done.returncode,
            output_tail=tail,
            message=f"benchmark {bench.name}, side {slot.side.name}, {phase} "
            f"{slot.round + 1}: `{' '.join(slot.side.argv)}` {why}",
            hint="fix the program, then run again; the rounds recorded so far "
            "stay in the results file",
        )
    return done, parse_figures(done.stdout + "\n" + done.stderr, bench)


def _warm(
    runner: Runner,
    bench: Benchmark,
    cwd: Callable[[Slot], Path],
    progress: Callable[[RoundDone], None],
    context: Context | None,
) -> None:
    slots = schedule(bench, bench.warmup, warmup=True)
    start = time.monotonic()
    index = 0
    while index < len(slots) or time.monotonic() - start < bench.warmup_seconds:
        if index >= len(slots):  # keep warming up for warmup_seconds, still interleaved
            slots.extend(schedule(bench, 1, warmup=True))
        slot = slots[index]
        done, figures = _execute(runner, slot, bench, cwd(slot), context)
        index += 1
        progress(RoundDone(bench.name, slot, done.wall_s, figures, len(slots), index, done.cpu_s))


@contextmanager
def _set_up(
    runner: Runner,
    bench: Benchmark,
    where: Callable[[Side], Path],
    context: Context | None,
) -> Iterator[None]:
    """Each side's setup command before its first round, its cleanup after its last
    (also when a round failed or the run was interrupted, for the sides set up)."""
    ready: list[Side] = []
    failed = False
    try:
        for side in bench.sides:
            if side.setup:
                _hook(runner, "setup", side.setup, bench, side, where(side), context)
            ready.append(side)
        yield
    except BaseException:
        failed = True
        raise
    finally:
        for side in ready:
            if side.cleanup:
                try:
                    _hook(runner, "cleanup", side.cleanup, bench, side, where(side), context)
                except CommandFailed:
                    if not failed:  # the run's own failure (or Ctrl-C) is what is reported
                        raise


def run_benchmarks(
    benches: Sequence[Benchmark],
    results: Path,
    *,
    runner: Runner,
    cwd: Path,
    progress: Callable[[RoundDone], None] = lambda _: None,
    extra: Mapping[str, Any] | None = None,
    context: Context | None = None,
) -> str:
    """Run ``benches`` and append their rounds to ``results``; return the run's id.

    The first line of the run records the environment and the planned benchmarks;
    each recorded round follows as it ends.

    Raises:
        CommandFailed: a round's program failed (earlier rounds stay in the file).
    """
    with _worktrees(runner, benches, cwd) as trees:
        return _run(benches, results, runner, cwd, trees, progress, extra, context)


def _run(
    benches: Sequence[Benchmark],
    results: Path,
    runner: Runner,
    cwd: Path,
    trees: Mapping[str, tuple[Path, str]],
    progress: Callable[[RoundDone], None],
    extra: Mapping[str, Any] | None,
    context: Context | None,
) -> str:
    def home(side: Side) -> Path:
        return trees[side.revision][0] if side.revision else cwd

    def where(slot: Slot) -> Path:
        return home(slot.side)

    run_id = uuid.uuid4().hex[:12]
    header = {
        "type": "run",
        "format": FORMAT,
        "run": run_id,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": capture_environment(
            runner,
            cwd,
            context=context,
            variants=[s.libtorch for b in benches for s in b.sides if s.libtorch],
        ),
        "benchmarks": [b.as_dict() for b in benches],
        "revisions": {rev: commit for rev, (_, commit) in trees.items()},
        **(extra or {}),
    }
    results.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _write(fd, header)
        for bench in benches:
            with _set_up(runner, bench, home, context):
                _warm(runner, bench, where, progress, context)
                slots = schedule(bench, bench.rounds)
                for index, slot in enumerate(slots, 1):
                    done, figures = _execute(runner, slot, bench, where(slot), context)
                    _write(
                        fd,
                        {
                            "type": "round",
                            "run": run_id,
                            "benchmark": bench.name,
                            "side": slot.side.name,
                            "round": slot.round + 1,
                            "position": slot.position,
                            WALL: done.wall_s,
                            CPU: done.cpu_s,
                            "user_s": done.user_s,
                            "system_s": done.system_s,
                            "figures": figures,
                        },
                    )
                    progress(
                        RoundDone(
                            bench.name, slot, done.wall_s, figures, len(slots), index, done.cpu_s
                        )
                    )
    finally:
        os.close(fd)
    return run_id
