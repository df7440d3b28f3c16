"""Read a results file back, summarise it, render it, compare two of them (pure)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl._files import read_text_file, reason_of
from fdl.bench._plan import MEASURED, WALL
from fdl.bench._stats import Ratio, Summary, paired_ratio, ratio, summarize
from fdl.errors import UsageError

# The largest results file read (a round is a line of some hundred bytes: millions of rounds).
RESULTS_LIMIT = 1 << 30

__all__ = [
    "BenchResult",
    "Verdict",
    "compare_results",
    "load_results",
    "render_csv",
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
    # The round number of each value (parallel to ``values``): what pairs the sides.
    rounds: dict[str, list[int]] = field(default_factory=dict)
    # Rounds per side the run planned (None: not recorded).
    planned: int | None = None
    unit: str | None = None

    @property
    def complete(self) -> bool:
        """Whether every side has the rounds the run planned (a run stopped by Ctrl-C,
        a failed round or a kill has fewer)."""
        if self.planned is None:
            return True
        return all(len(v) >= self.planned for v in self.values.values())

    def paired(self) -> dict[str, Ratio]:
        """Each later side against the first, round by round: the median of the
        per-round ratios with its interval (rounds where both sides have a value)."""
        sides = [s for s, v in self.values.items() if v]
        if len(sides) < 2:
            return {}
        base = dict(zip(self.rounds.get(sides[0], []), self.values[sides[0]], strict=False))
        out: dict[str, Ratio] = {}
        for side in sides[1:]:
            pairs = [
                (base[r], v)
                for r, v in zip(self.rounds.get(side, []), self.values[side], strict=False)
                if r in base
            ]
            try:
                out[side] = paired_ratio(pairs)
            except ValueError:
                continue
        return out

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
            "unit": self.unit,
            "threshold": {"percent": self.percent, "mads": self.mads},
            "complete": self.complete,
            "planned_rounds": self.planned,
            "sides": {s: summ.as_dict() for s, summ in self.summaries().items()},
            "ratios": {s: r.as_dict() for s, r in self.ratios().items()},
            "paired_ratios": {s: r.as_dict() for s, r in self.paired().items()},
        }


def _bad(path: Path, line: int, why: str) -> UsageError:
    return UsageError(
        f"{path}:{line}: {why}",
        hint="pass a file written by `fdl bench run` (JSON Lines, one record a line)",
    )


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Check:
    """Checks a record's fields against the format, naming the first that is wrong."""

    def __init__(self, path: Path, line: int) -> None:
        self.path, self.line = path, line

    def fail(self, where: str, want: str, value: Any) -> UsageError:
        return _bad(self.path, self.line, f"{where} must be {want}, not {_kind(value)}")

    def string(self, record: Mapping[str, Any], key: str, where: str, *, need: bool) -> None:
        value = record.get(key)
        if (value is None and not need) or isinstance(value, str):
            return
        raise self.fail(f"{where}.{key}", "a string", value)

    def number(self, record: Mapping[str, Any], key: str, where: str) -> None:
        value = record.get(key)
        if value is not None and not _number(value):
            raise self.fail(f"{where}.{key}", "a number", value)

    def mapping(self, value: Any, where: str, *, need: bool = False) -> Mapping[str, Any]:
        if value is None and not need:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, "an object", value)
        return value

    def listing(self, value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(where, "a list", value)
        return value


def _check_header(check: _Check, record: Mapping[str, Any]) -> None:
    check.string(record, "run", "run", need=True)
    for i, bench in enumerate(check.listing(record.get("benchmarks"), "benchmarks")):
        where = f"benchmarks[{i}]"
        b = check.mapping(bench, where, need=True)
        check.string(b, "name", where, need=True)
        check.string(b, "metric", where, need=False)
        rounds = b.get("rounds")
        if rounds is not None and (not isinstance(rounds, int) or isinstance(rounds, bool)):
            raise check.fail(f"{where}.rounds", "a whole number", rounds)
        threshold = check.mapping(b.get("threshold"), f"{where}.threshold")
        for key in ("percent", "mads"):
            check.number(threshold, key, f"{where}.threshold")
        for unit in check.mapping(b.get("units"), f"{where}.units").values():
            if not isinstance(unit, str):
                raise check.fail(f"{where}.units", "an object of strings", unit)
        for j, side in enumerate(check.listing(b.get("sides"), f"{where}.sides")):
            check.string(
                check.mapping(side, f"{where}.sides[{j}]", need=True),
                "name",
                f"{where}.sides[{j}]",
                need=True,
            )


def _check_round(check: _Check, record: Mapping[str, Any]) -> None:
    for key in ("run", "benchmark", "side"):
        check.string(record, key, "round", need=True)
    for key in (*MEASURED, "round"):
        check.number(record, key, "round")
    check.mapping(record.get("figures"), "round.figures")


def load_results(path: Path, run: str | None = None) -> tuple[dict[str, Any], list[BenchResult]]:
    """The header and benchmarks of one run in ``path`` (default: the last run).

    Every record is checked against the format before it is used: a field of the
    wrong type is named with its line.

    Raises:
        UsageError: the file is missing, not JSON Lines, does not follow the format,
            or holds no such run.
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
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except RecursionError:
            raise _bad(path, number, "a JSON line nested too deeply") from None
        except ValueError:
            # A run killed mid-write leaves at most one torn last line; skip only that.
            if number == len(lines):
                continue
            raise _bad(path, number, "not a JSON line") from None
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "run":
            _check_header(_Check(path, number), record)
            headers.append(record)
        elif kind == "round":
            _check_round(_Check(path, number), record)
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
    for b in chosen.get("benchmarks") or []:
        threshold = b.get("threshold") or {}
        metric = b.get("metric") or WALL
        units = b.get("units") or {}
        results[b["name"]] = BenchResult(
            b["name"],
            metric,
            float(threshold["percent"]) if _number(threshold.get("percent")) else 5.0,
            float(threshold["mads"]) if _number(threshold.get("mads")) else 3.0,
            {s["name"]: [] for s in b.get("sides") or []},
            planned=b.get("rounds"),
            unit=units.get(metric) or ("s" if metric in MEASURED else None),
        )
    for number, r in enumerate(rounds):
        result = results.get(r["benchmark"])
        if r["run"] != chosen["run"] or result is None:
            continue
        value: Any = (
            r.get(result.metric)
            if result.metric in MEASURED
            else (r.get("figures") or {}).get(result.metric)
        )
        if _number(value):
            result.values.setdefault(r["side"], []).append(float(value))
            order: Any = r.get("round")
            result.rounds.setdefault(r["side"], []).append(
                int(order) if _number(order) and math.isfinite(order) else -1 - number
            )
    return chosen, list(results.values())


def _g(value: float) -> str:
    return f"{value:.4g}"


def _unit(value: float, unit: str | None) -> str:
    return f"{_g(value)} {unit}" if unit else _g(value)


def _ratio(r: Ratio | None) -> str:
    return f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]" if r else "baseline"


def render_markdown(results: list[BenchResult]) -> str:
    """A Markdown table: median ± scaled MAD (with the unit), stddev, min-max, n,
    outliers, the ratio of medians and the paired ratio, each with its 95% interval;
    a benchmark with fewer rounds than planned is marked incomplete."""
    lines = [
        "| benchmark | side | metric | median ± scaled MAD | stddev | min – max | n "
        "| outliers | ratio [95% CI] | paired ratio [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for result in results:
        ratios, paired = result.ratios(), result.paired()
        u = result.unit
        for side, s in result.summaries().items():
            metric = f"{result.metric} ({u})" if u else result.metric
            lines.append(
                f"| {result.name} | {side} | {metric} | {_unit(s.median, u)} ± "
                f"{_unit(s.scaled_mad, u)} | {_unit(s.stddev, u)} | {_g(s.min)} – "
                f"{_unit(s.max, u)} | {s.n} | {len(s.outliers)} | {_ratio(ratios.get(side))} "
                f"| {_ratio(paired.get(side))} |"
            )
        if not result.complete:
            done = ", ".join(f"{side} {len(v)}" for side, v in result.values.items())
            notes.append(
                f"{result.name}: incomplete, the run stopped early "
                f"({done} of {result.planned} rounds)"
            )
    return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in notes)


CSV_COLUMNS = (
    "benchmark",
    "side",
    "metric",
    "unit",
    "n",
    "planned",
    "complete",
    "median",
    "scaled_mad",
    "stddev",
    "mean",
    "min",
    "max",
    "outliers",
    "ratio",
    "ratio_low",
    "ratio_high",
    "paired_ratio",
    "paired_low",
    "paired_high",
)


def render_csv(results: list[BenchResult]) -> str:
    """One row per benchmark side (RFC 4180, a header row first)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for result in results:
        ratios, paired = result.ratios(), result.paired()
        for side, s in result.summaries().items():
            r, p = ratios.get(side), paired.get(side)
            writer.writerow(
                [
                    result.name,
                    side,
                    result.metric,
                    result.unit or "",
                    s.n,
                    "" if result.planned is None else result.planned,
                    str(result.complete).lower(),
                    repr(s.median),
                    repr(s.scaled_mad),
                    repr(s.stddev),
                    repr(s.mean),
                    repr(s.min),
                    repr(s.max),
                    len(s.outliers),
                    *((repr(r.value), repr(r.low), repr(r.high)) if r else ("", "", "")),
                    *((repr(p.value), repr(p.low), repr(p.high)) if p else ("", "", "")),
                ]
            )
    return buffer.getvalue()


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

    @property
    def finite(self) -> bool:
        return math.isfinite(self.baseline) and math.isfinite(self.current)

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
            # Not a number (a NaN or infinite figure) is never a pass: write the test so
            # that only a measured, finite median within the threshold is ok.
            finite = all(math.isfinite(x) for x in (b.median, s.median, spread))
            slower = not finite or (percent > cur.percent and mads > cur.mads)
            verdicts.append(
                Verdict(cur.name, side, cur.metric, b.median, s.median, percent, mads, slower)
            )
    return verdicts
