"""Helpers for the benchmark scripts: timing and table printing."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def wall_times(
    argv: Sequence[str], *, runs: int, cwd: Path | None = None, env: dict[str, str] | None = None
) -> list[float]:
    """Wall-clock seconds of ``runs`` executions of ``argv`` (after one warm-up run)."""
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode()[-400:]}")
    return times


def median_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1000


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain aligned table on stdout."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if index == 0:
            print("  ".join("-" * width for width in widths))
