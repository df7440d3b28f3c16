"""``fdl bench``: benchmarks with honest variance, declared in the manifest.

- :mod:`._stats`: median, scaled MAD, outliers, bootstrap ratio intervals (pure).
- :mod:`._plan`: the ``bench:`` section as benchmarks and their interleaved rounds (pure).
- :mod:`._run`: running the rounds, each appended to a JSON Lines file as it ends.
- :mod:`._report`: summaries, the Markdown table, and the regression check.
"""

from __future__ import annotations

from fdl.bench._plan import Benchmark, Metric, Side, Step, benchmarks, interleave
from fdl.bench._report import (
    Comparison,
    SideResult,
    compare,
    load_rounds,
    render_table,
    summarize_rounds,
)
from fdl.bench._run import RoundResult, capture_environment, read_figure, run_benchmarks
from fdl.bench._stats import (
    MAD_SCALE,
    Summary,
    bootstrap_ratio,
    mad,
    median,
    outliers,
    scaled_mad,
    summarize,
)

__all__ = [
    "MAD_SCALE",
    "Benchmark",
    "Comparison",
    "Metric",
    "RoundResult",
    "Side",
    "SideResult",
    "Step",
    "Summary",
    "benchmarks",
    "bootstrap_ratio",
    "capture_environment",
    "compare",
    "interleave",
    "load_rounds",
    "mad",
    "median",
    "outliers",
    "read_figure",
    "render_table",
    "run_benchmarks",
    "scaled_mad",
    "summarize",
    "summarize_rounds",
]
