"""Results files to summaries, the Markdown table, and the regression check."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdl.bench._stats import Summary, bootstrap_ratio, summarize
from fdl.errors import UsageError

__all__ = ["Comparison", "SideResult", "compare", "load_rounds", "render_table", "summarize_rounds"]


def load_rounds(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(environment lines, measured rounds) of a results file; a torn last line (a run
    killed while writing) is skipped.

    Raises:
        UsageError: no such file, or no measured round in it.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(
            f"cannot read {path}: {exc.strerror or exc}", hint="fdl bench run writes it"
        ) from None
    environments, rounds = [], []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        if row.get("kind") == "environment":
            environments.append(row)
        elif row.get("kind") == "round" and not row.get("warmup") and row.get("value") is not None:
            rounds.append(row)
    if not rounds:
        raise UsageError(f"{path} has no measured round", hint="run fdl bench run first")
    return environments, rounds


@dataclass(frozen=True)
class SideResult:
    """One side of one benchmark: its rounds summarised, and its ratio to the first side."""

    bench: str
    side: str
    unit: str
    better: str
    summary: Summary
    values: tuple[float, ...]
    ratio: tuple[float, float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "bench": self.bench,
            "side": self.side,
            "unit": self.unit,
            **self.summary.to_json(),
        }
        if self.ratio is not None:
            data["ratio"] = {"value": self.ratio[0], "low": self.ratio[1], "high": self.ratio[2]}
        return data


def summarize_rounds(rounds: Iterable[dict[str, Any]]) -> list[SideResult]:
    """Per benchmark and side (in the order the manifest declares the sides): the summary,
    and for every side after the first the ratio of medians to the first side with a 95%
    bootstrap interval."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    benches: dict[str, int] = {}
    for row in rounds:
        benches.setdefault(str(row["bench"]), len(benches))
        grouped.setdefault((str(row["bench"]), str(row["side"])), []).append(row)
    results: list[SideResult] = []
    first: dict[str, list[float]] = {}

    def declared(item: tuple[tuple[str, str], list[dict[str, Any]]]) -> tuple[int, int]:
        (bench, _), rows = item
        return benches[bench], int(rows[0].get("side_index", 0))

    for (bench, side), rows in sorted(grouped.items(), key=declared):
        values = [float(r["value"]) for r in rows]
        ratio = None
        if bench in first:
            try:
                ratio = bootstrap_ratio(values, first[bench])
            except ValueError:
                ratio = None
        else:
            first[bench] = values
        results.append(
            SideResult(
                bench,
                side,
                str(rows[0].get("unit") or "ms"),
                str(rows[0].get("better") or "lower"),
                summarize(values),
                tuple(values),
                ratio,
            )
        )
    return results


def _number(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def render_table(results: list[SideResult]) -> str:
    """A Markdown table: median ± scaled MAD, stddev, min-max, n, outliers, ratio [95% CI]."""
    lines = [
        "| benchmark | side | median ± scaled MAD | stddev | min - max | n | outliers | ratio [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r.summary
        ratio = (
            f"{r.ratio[0]:.3f} [{r.ratio[1]:.3f}, {r.ratio[2]:.3f}]" if r.ratio is not None else "1"
        )
        lines.append(
            f"| {r.bench} | {r.side} | {_number(s.median)} ± {_number(s.scaled_mad)} {r.unit} "
            f"| {_number(s.stdev)} | {_number(s.minimum)} - {_number(s.maximum)} | {s.n} "
            f"| {len(s.outliers)} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Comparison:
    """A benchmark side in the baseline and now."""

    bench: str
    side: str
    unit: str
    baseline: Summary
    current: Summary
    change_percent: float
    change_mads: float
    percent: float
    mads: float
    regression: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "side": self.side,
            "unit": self.unit,
            "baseline_median": self.baseline.median,
            "current_median": self.current.median,
            "change_percent": round(self.change_percent, 3),
            "change_mads": round(self.change_mads, 3),
            "threshold": {"percent": self.percent, "mads": self.mads},
            "regression": self.regression,
        }


def compare(baseline: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[Comparison]:
    """Each benchmark side present in both: slower beyond the threshold in percent *and* in
    scaled MADs (the larger of the two samples' spreads) is a regression. "Slower" follows
    the metric: higher for times, lower for a ``better: higher`` figure."""
    before = {(r.bench, r.side): r for r in summarize_rounds(baseline)}
    rows: list[Comparison] = []
    for now in summarize_rounds(current):
        old = before.get((now.bench, now.side))
        if old is None:
            continue
        sample = next(r for r in current if r["bench"] == now.bench and r["side"] == now.side)
        threshold = sample.get("threshold") or {}
        percent, mads = float(threshold.get("percent", 5.0)), float(threshold.get("mads", 3.0))
        delta = now.summary.median - old.summary.median
        worse = -delta if now.better == "higher" else delta
        spread = max(old.summary.scaled_mad, now.summary.scaled_mad)
        change_percent = 100.0 * worse / old.summary.median if old.summary.median else 0.0
        change_mads = worse / spread if spread else (float("inf") if worse > 0 else 0.0)
        rows.append(
            Comparison(
                now.bench,
                now.side,
                now.unit,
                old.summary,
                now.summary,
                change_percent,
                change_mads,
                percent,
                mads,
                change_percent > percent and change_mads > mads,
            )
        )
    return rows
