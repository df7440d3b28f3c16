"""Run planned benchmarks: warm-up, interleaved rounds, one JSON line per round.

Every round is appended (and flushed) to the results file the moment it ends, so a run
stopped by Ctrl-C keeps every finished round and ``fdl bench report`` works on them.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from fdl.bench._env import capture_environment
from fdl.bench._plan import WALL, Benchmark, Slot, schedule
from fdl.errors import CommandFailed, EnvironmentProblem
from fdl.runner import Runner, clean_environ

if TYPE_CHECKING:
    from fdl.paths import Context

__all__ = ["FORMAT", "RoundDone", "parse_figures", "run_benchmarks"]

# The version of the JSON Lines format (documented in the README).
FORMAT = 1


@dataclass(frozen=True)
class RoundDone:
    """Progress: one slot finished (warm-up or recorded)."""

    bench: str
    slot: Slot
    wall_s: float
    figures: Mapping[str, float]
    total: int
    index: int


def parse_figures(output: str, bench: Benchmark) -> dict[str, float]:
    """The figures a round's output reports: the last match of each regex, and the
    numeric values of the last JSON-object line when ``json_line`` is set."""
    found: dict[str, float] = {}
    for name, pattern in bench.figures.items():
        matches = re.findall(pattern, output)
        if matches:
            with contextlib.suppress(ValueError):
                found[name] = float(matches[-1])
    if bench.json_line:
        for line in reversed(output.splitlines()):
            text = line.strip()
            if not (text.startswith("{") and text.endswith("}")):
                continue
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict):
                for key, value in data.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        found.setdefault(str(key), float(value))
                break
    return found


def _write(out: IO[str], record: Mapping[str, Any]) -> None:
    out.write(json.dumps(record, sort_keys=True) + "\n")
    out.flush()


@contextmanager
def _worktrees(
    runner: Runner, benches: Sequence[Benchmark], cwd: Path
) -> Iterator[dict[str, tuple[Path, str]]]:
    """A detached git worktree per revision the sides name: revision -> (the project's
    directory inside it, the commit). Removed on every exit."""
    revisions = sorted({s.revision for b in benches for s in b.sides if s.revision})
    if not revisions:
        yield {}
        return
    top = Path(runner.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd).stdout.strip())
    inside = cwd.resolve().relative_to(top.resolve())
    scratch = Path(tempfile.mkdtemp(prefix="fdl-bench-"))
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


def _execute(
    runner: Runner, slot: Slot, bench: Benchmark, cwd: Path, context: Context | None = None
) -> tuple[float, dict[str, float]]:
    extra = variant_env(context, slot.side.libtorch) if slot.side.libtorch else {}
    start = time.perf_counter()
    done = runner.run(
        slot.side.argv,
        cwd=cwd,
        env=clean_environ({**extra, **slot.side.env}),
        check=False,
        timeout=bench.timeout,
    )
    wall = time.perf_counter() - start
    if not done.ok:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        phase = "warm-up round" if slot.warmup else "round"
        raise CommandFailed(
            list(slot.side.argv),
            done.returncode,
            output_tail=tail,
            message=f"benchmark {bench.name}, side {slot.side.name}, {phase} "
            f"{slot.round + 1}: `{' '.join(slot.side.argv)}` exited with status "
            f"{done.returncode}",
            hint="fix the program, then run again; the rounds recorded so far "
            "stay in the results file",
        )
    return wall, parse_figures(done.stdout + "\n" + done.stderr, bench)


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
        wall, figures = _execute(runner, slot, bench, cwd(slot), context)
        index += 1
        progress(RoundDone(bench.name, slot, wall, figures, len(slots), index))


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
    def where(slot: Slot) -> Path:
        return trees[slot.side.revision][0] if slot.side.revision else cwd

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
    with results.open("a", encoding="utf-8") as out:
        _write(out, header)
        for bench in benches:
            _warm(runner, bench, where, progress, context)
            slots = schedule(bench, bench.rounds)
            for index, slot in enumerate(slots, 1):
                wall, figures = _execute(runner, slot, bench, where(slot), context)
                _write(
                    out,
                    {
                        "type": "round",
                        "run": run_id,
                        "benchmark": bench.name,
                        "side": slot.side.name,
                        "round": slot.round,
                        "position": slot.position,
                        WALL: wall,
                        "figures": figures,
                    },
                )
                progress(RoundDone(bench.name, slot, wall, figures, len(slots), index))
    return run_id
