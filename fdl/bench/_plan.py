"""Benchmarks from the manifest, and the order their rounds run in (pure).

Rounds are interleaved across the compared sides (A B A B ...) and the order rotates each
round (A B, B A, A B ...), so drift in the machine (thermals, other load, caches) hits
every side alike instead of the side that happens to run last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdl.errors import UsageError

__all__ = ["Benchmark", "Metric", "Side", "Step", "benchmarks", "interleave"]


@dataclass(frozen=True)
class Metric:
    """What a round measures: a figure the program prints, else its wall time."""

    regex: str | None = None
    json_key: str | None = None
    unit: str = "ms"
    better: str = "lower"

    @property
    def wall_time(self) -> bool:
        return self.regex is None and self.json_key is None


@dataclass(frozen=True)
class Side:
    """One compared side: a command and its environment."""

    name: str
    run: str
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Benchmark:
    """A benchmark of the ``bench:`` section."""

    name: str
    description: str
    sides: tuple[Side, ...]
    directory: Path
    rounds: int = 10
    warmup: int = 1
    timeout: float = 3600.0
    metric: Metric = field(default_factory=Metric)
    percent: float = 5.0
    mads: float = 3.0


@dataclass(frozen=True)
class Step:
    """One round of one side."""

    benchmark: Benchmark
    side: Side
    round: int
    warmup: bool


def benchmarks(
    data: Mapping[str, Any], directory: Path, names: Sequence[str] = (), rounds: int | None = None
) -> list[Benchmark]:
    """The benchmarks of a validated ``bench:`` section (all, or those named).

    Raises:
        UsageError: a name that is not declared, or no benchmark at all.
    """
    section: Mapping[str, Any] = data.get("bench") or {}
    if not section:
        raise UsageError(
            "this manifest declares no benchmarks",
            hint="add a `bench:` section to fdl.yml (see the README's `fdl bench`)",
        )
    unknown = [n for n in names if n not in section]
    if unknown:
        raise UsageError(
            f"no benchmark {unknown[0]!r} in the manifest",
            hint=f"declared: {', '.join(section)}",
        )
    chosen = list(names) or list(section)
    return [_benchmark(n, section[n] or {}, directory, rounds) for n in chosen]


def _benchmark(
    name: str, spec: Mapping[str, Any], directory: Path, rounds: int | None
) -> Benchmark:
    common = dict(spec.get("env") or {})
    declared = spec.get("sides") or {}
    sides = tuple(
        Side(
            side,
            (value or {}).get("run") or spec.get("run") or "",
            {**common, **((value or {}).get("env") or {})},
        )
        for side, value in declared.items()
    ) or (Side("run", spec.get("run") or "", common),)
    missing = [s.name for s in sides if not s.run]
    if missing:
        raise UsageError(
            f"benchmark {name!r}: side {missing[0]!r} has no command",
            hint=f"give bench.{name} a `run:` (or each side its own)",
        )
    metric = spec.get("metric") or {}
    threshold = spec.get("threshold") or {}
    return Benchmark(
        name=name,
        description=str(spec.get("description") or ""),
        sides=sides,
        directory=directory,
        rounds=rounds or int(spec.get("rounds") or 10),
        warmup=int(spec["warmup"]) if spec.get("warmup") is not None else 1,
        timeout=float(spec.get("timeout") or 3600.0),
        metric=Metric(
            regex=metric.get("regex"),
            json_key=metric.get("json"),
            unit=str(metric.get("unit") or "ms"),
            better=str(metric.get("better") or "lower"),
        ),
        percent=float(threshold.get("percent", 5.0)),
        mads=float(threshold.get("mads", 3.0)),
    )


def interleave(benchmark: Benchmark) -> list[Step]:
    """Warm-up rounds, then the measured ones; within each round every side once, the
    order rotated by one each round."""
    steps: list[Step] = []
    sides = list(benchmark.sides)
    for index in range(benchmark.warmup + benchmark.rounds):
        shift = index % len(sides)
        for side in sides[shift:] + sides[:shift]:
            warm = index < benchmark.warmup
            number = index if warm else index - benchmark.warmup
            steps.append(Step(benchmark, side, number, warm))
    return steps
