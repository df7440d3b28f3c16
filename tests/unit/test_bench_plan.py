"""The bench planner and the figure reader (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdl.bench import Metric, benchmarks, interleave, read_figure
from fdl.errors import UsageError


def test_sides_interleave_and_rotate(tmp_path: Path) -> None:
    data = {
        "bench": {
            "b": {
                "run": "x",
                "sides": {"a": {}, "b": {}, "c": {"run": "y", "env": {"K": "1"}}},
                "rounds": 2,
                "warmup": 1,
            }
        }
    }
    [bench] = benchmarks(data, tmp_path)
    steps = interleave(bench)
    assert [(s.side.name, s.round, s.warmup) for s in steps] == [
        ("a", 0, True),
        ("b", 0, True),
        ("c", 0, True),
        ("b", 0, False),
        ("c", 0, False),
        ("a", 0, False),
        ("c", 1, False),
        ("a", 1, False),
        ("b", 1, False),
    ]
    assert bench.sides[2].run == "y" and bench.sides[2].env == {"K": "1"}


def test_unknown_or_missing_benchmarks(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="declares no benchmarks"):
        benchmarks({}, tmp_path)
    with pytest.raises(UsageError, match="no benchmark 'nope'"):
        benchmarks({"bench": {"b": {"run": "x"}}}, tmp_path, ["nope"])


def test_figures_from_a_regex_a_json_line_or_the_wall_time() -> None:
    out = "step 1\nms/epoch: 12.5\nms/epoch: 11.25\n"
    assert read_figure(Metric(regex=r"ms/epoch: ([0-9.]+)"), out, 99.0) == 11.25
    assert read_figure(Metric(json_key="ms"), 'x\n{"ms": 7.5, "loss": 1}\n', 99.0) == 7.5
    assert read_figure(Metric(), "anything", 99.0) == 99.0
    assert read_figure(Metric(regex=r"ms: ([0-9.]+)"), "nothing", 99.0) is None
