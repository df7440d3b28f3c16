"""``--publish``: the conditions of a run whose figures are published.

A clean git tree (the figures belong to a commit), GPU clocks locked (boost clocks
follow temperature and make rounds drift) and restored afterwards, Ctrl-C included, and
no other process on the GPUs. Without nvidia-smi the plan says what it would do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl.bench._env import gpu_processes
from fdl.errors import EnvironmentProblem, UsageError
from fdl.runner import Runner

__all__ = ["PublishPlan", "plan_publish", "published"]


@dataclass(frozen=True)
class PublishPlan:
    """What a publication run does around the rounds."""

    gpus: bool
    lock: tuple[str, ...] | None
    restore: tuple[str, ...] | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "lock": list(self.lock) if self.lock else None,
            "restore": list(self.restore) if self.restore else None,
            "notes": list(self.notes),
        }


def _max_clock(runner: Runner, cwd: Path) -> str | None:
    done = runner.run(
        ["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
        cwd=cwd,
        check=False,
    )
    clocks = [c.strip() for c in done.stdout.splitlines() if c.strip().isdigit()]
    # Several GPUs: the lowest maximum is one clock every GPU can hold.
    return str(min(int(c) for c in clocks)) if done.ok and clocks else None


def plan_publish(runner: Runner, cwd: Path, clock: int | None = None) -> PublishPlan:
    """Check the conditions of a publication run and plan the clock lock.

    Raises:
        UsageError: the git tree is not clean (or not a git checkout).
        EnvironmentProblem: another process uses a GPU, or no clock could be chosen.
    """
    status = runner.run(["git", "status", "--porcelain"], cwd=cwd, check=False)
    if not status.ok:
        raise UsageError(
            f"--publish needs a git checkout; {cwd} is not one",
            hint="publish from the project's repository, or drop --publish",
        )
    if status.stdout.strip():
        changed = ", ".join(line[3:] for line in status.stdout.splitlines()[:5])
        raise UsageError(
            f"--publish needs a clean git tree; changed: {changed}",
            hint="commit or stash the changes, so the figures belong to one commit",
        )
    if runner.which("nvidia-smi") is None:
        return PublishPlan(
            gpus=False,
            lock=None,
            restore=None,
            notes=(
                "no nvidia-smi on PATH: no GPU clocks to lock; with GPUs, --publish would "
                "run `nvidia-smi -lgc <max SM clock>,<max SM clock>` before the rounds and "
                "`nvidia-smi -rgc` after them (also on Ctrl-C), and refuse while another "
                "process uses a GPU",
            ),
        )
    users = gpu_processes(runner, cwd) or []
    if users:
        raise EnvironmentProblem(
            f"--publish refuses: other processes use the GPUs: {'; '.join(users)}",
            hint="stop them (nvidia-smi lists them), then run again",
        )
    chosen = str(clock) if clock else _max_clock(runner, cwd)
    if chosen is None:
        raise EnvironmentProblem(
            "--publish could not read the GPUs' maximum SM clock from nvidia-smi",
            hint="pass the clock to lock: --clock MHZ",
        )
    return PublishPlan(
        gpus=True,
        lock=("nvidia-smi", "-lgc", f"{chosen},{chosen}"),
        restore=("nvidia-smi", "-rgc"),
        notes=(f"GPU clocks locked at {chosen} MHz for the run",),
    )


@contextmanager
def published(plan: PublishPlan | None, runner: Runner, cwd: Path) -> Iterator[None]:
    """Lock the clocks for the body and restore them on any exit (Ctrl-C included)."""
    if plan is None or plan.lock is None:
        yield
        return
    runner.run(plan.lock, cwd=cwd, check=True)
    try:
        yield
    finally:
        if plan.restore is not None:
            runner.run(plan.restore, cwd=cwd, check=False)
