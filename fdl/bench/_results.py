"""Read a results file back, summarise it, render it, compare two of them (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._files import read_text_file, reason_of
from fdl.bench._plan import WALL
from fdl.bench._stats import Ratio, Summary, ratio, summarize
from fdl.errors import UsageError

# The largest results file read (a round is a line of some hundred bytes: millions of rounds).
RESULTS_LIMIT = 1 << 30

__all__ = [
    "BenchResult",
    "Verdict",
    "compare_results",
    "load_results",
    "render_markdown",
]


@dataclass
class BenchResult:
    """One benchmark of one run: its sides' values of the metric, in side order."""

    name: str
    metric: str
    percent: float
    mads: float
    values: dict[str, list[float]] = field(default_factory=dict)

    def summaries(self) -> dict[str, Summary]:
        return {side: summarize(v) for side, v in self.values.items() if v}

    def ratios(self) -> dict[str, Ratio]:
        """Each later side against the first (the baseline): median(side) / median(first)."""
        sides = [s for s, v in self.values.items() if v]
        if len(sides) < 2:
            return {}
        base = self.values[sides[0]]
        out: dict[str, Ratio] = {}
        for side in sides[1:]:
            try:
                out[side] = ratio(base, self.values[side])
            except ValueError:
                continue
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "threshold": {"percent": self.percent, "mads": self.mads},
            "sides": {s: summ.as_dict() for s, summ in self.summaries().items()},
            "ratios": {s: r.as_dict() for s, r in self.ratios().items()},
        }


def _bad(path: Path, line: int, why: str) -> UsageError:
    return UsageError(
        f"{path}:{line}: {why}",
        hint="pass a file written by `fdl bench run` (JSON Lines, one record a line)",
    )


def load_results(path: Path, run: str | None = None) -> tuple[dict[str, Any], list[BenchResult]]:
    """The header and benchmarks of one run in ``path`` (default: the last run).

    Raises:
        UsageError: the file is missing, not JSON Lines, or holds no such run.
    """
    try:
        # a FIFO or a device is refused, not read (it would block or never end)
        text = read_text_file(path, limit=RESULTS_LIMIT)
    except OSError as exc:
        hint = (
            "run `fdl bench run` first"
            if isinstance(exc, FileNotFoundError)
            else "pass a file written by `fdl bench run` (JSON Lines, one record a line)"
        )
        raise UsageError(f"cannot read {path}: {reason_of(exc)}", hint=hint) from None
    headers: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            # A run killed mid-write leaves at most one torn last line; skip only that.
            if number == len(text.splitlines()):
                continue
            raise _bad(path, number, "not a JSON line") from None
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "run":
            headers.append(record)
        elif kind == "round":
            rounds.append(record)
        else:
            raise _bad(path, number, "a record without type run or round")
    if not headers:
        raise _bad(path, 1, "no run header")
    chosen = headers[-1] if run is None else next((h for h in headers if h["run"] == run), None)
    if chosen is None:
        runs = ", ".join(h["run"] for h in headers)
        raise UsageError(f"{path}: no run {run!r}", hint=f"runs in the file: {runs}")
    results: dict[str, BenchResult] = {}
    for b in chosen.get("benchmarks", []):
        threshold = b.get("threshold", {})
        results[b["name"]] = BenchResult(
            b["name"],
            b.get("metric", WALL),
            float(threshold.get("percent", 5.0)),
            float(threshold.get("mads", 3.0)),
            {s["name"]: [] for s in b.get("sides", [])},
        )
    for r in rounds:
        result = results.get(r.get("benchmark", ""))
        if r.get("run") != chosen["run"] or result is None:
            continue
        value = r.get(WALL) if result.metric == WALL else r.get("figures", {}).get(result.metric)
        if isinstance(value, (int, float)):
            result.values.setdefault(r["side"], []).append(float(value))
    return chosen, list(results.values())


def _g(value: float) -> str:
    return f"{value:.4g}"


def render_markdown(results: list[BenchResult]) -> str:
    """A Markdown table: median ± scaled MAD, stddev, min-max, n, outliers, ratio [CI]."""
    lines = [
        "| benchmark | side | metric | median ± scaled MAD | stddev | min – max | n "
        "| outliers | ratio [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        ratios = result.ratios()
        for side, s in result.summaries().items():
            r = ratios.get(side)
            shown = f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]" if r else "baseline"
            lines.append(
                f"| {result.name} | {side} | {result.metric} | {_g(s.median)} ± "
                f"{_g(s.scaled_mad)} | {_g(s.stddev)} | {_g(s.min)} – {_g(s.max)} | {s.n} "
                f"| {len(s.outliers)} | {shown} |"
            )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Verdict:
    """How one side of a benchmark moved from the baseline file to the current one."""

    name: str
    side: str
    metric: str
    baseline: float
    current: float
    percent: float
    mads: float
    slower: bool

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def compare_results(baseline: list[BenchResult], current: list[BenchResult]) -> list[Verdict]:
    """Each side present in both: slower when the current median exceeds the baseline's
    by more than the threshold's percent AND by more than its count of scaled MADs
    (the larger of the two files' scaled MADs, so noise on either side is allowed for).
    Higher values are slower (times); thresholds come from the current file."""
    base = {r.name: r for r in baseline}
    verdicts: list[Verdict] = []
    for cur in current:
        old = base.get(cur.name)
        if old is None or old.metric != cur.metric:
            continue
        old_s, cur_s = old.summaries(), cur.summaries()
        for side, s in cur_s.items():
            if side not in old_s:
                continue
            b = old_s[side]
            delta = s.median - b.median
            percent = 100.0 * delta / b.median if b.median else 0.0
            spread = max(b.scaled_mad, s.scaled_mad)
            mads = delta / spread if spread else (float("inf") if delta > 0 else 0.0)
            slower = percent > cur.percent and mads > cur.mads
            verdicts.append(
                Verdict(cur.name, side, cur.metric, b.median, s.median, percent, mads, slower)
            )
    return verdicts
