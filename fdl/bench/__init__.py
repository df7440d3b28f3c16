"""Benchmarks declared in the manifest's ``bench:`` section (``fdl bench``).

``plan_benchmarks`` (pure) turns the section into benchmarks; ``run_benchmarks`` runs
them through ``fdl.runner`` (warm-up, interleaved rounds, one JSON line per round);
``load_results``/``render_markdown``/``compare_results`` read results back (pure).
"""

from __future__ import annotations

from fdl.bench._images import image_profiles, prepare_images
from fdl.bench._output import check_results_file
from fdl.bench._plan import (
    CPU,
    MAX_ROUNDS,
    WALL,
    Benchmark,
    Side,
    Slot,
    plan_benchmarks,
    round_order,
    schedule,
)
from fdl.bench._plot import plot_results
from fdl.bench._publish import PublishPlan, plan_publish, published
from fdl.bench._results import (
    BenchResult,
    Verdict,
    compare_results,
    load_results,
    render_csv,
    render_markdown,
)
from fdl.bench._run import FORMAT, RoundDone, parse_figures, prune_stale_worktrees, run_benchmarks
from fdl.bench._stats import MAD_SCALE, Ratio, Summary, ratio, summarize

__all__ = [
    "CPU",
    "FORMAT",
    "MAD_SCALE",
    "MAX_ROUNDS",
    "WALL",
    "BenchResult",
    "Benchmark",
    "PublishPlan",
    "Ratio",
    "RoundDone",
    "Side",
    "Slot",
    "Summary",
    "Verdict",
    "check_results_file",
    "compare_results",
    "image_profiles",
    "load_results",
    "parse_figures",
    "plan_benchmarks",
    "plan_publish",
    "plot_results",
    "prepare_images",
    "prune_stale_worktrees",
    "published",
    "ratio",
    "render_csv",
    "render_markdown",
    "round_order",
    "run_benchmarks",
    "schedule",
    "summarize",
]
