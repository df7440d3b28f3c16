"""PNG plots of a run (the ``plot`` extra: matplotlib): per benchmark, each side's
rounds in the order they ran, and their distributions side by side."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fdl.bench._output import PLOT_SOURCE, check_plot_file
from fdl.bench._results import BenchResult
from fdl.errors import EnvironmentProblem

__all__ = ["plot_results"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise EnvironmentProblem(
            "plots need matplotlib, which is not installed",
            hint="pip install 'fdl[plot]' (or pip install matplotlib)",
        ) from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_results(results: Sequence[BenchResult], directory: Path) -> list[Path]:
    """Write ``<directory>/<benchmark>.png`` for each benchmark; return the files.

    Raises:
        EnvironmentProblem: matplotlib is missing, or the directory cannot be written.
    """
    plt = _pyplot()
    for result in results:  # every plot it would replace is fdl's, before drawing any
        check_plot_file(_plot_path(directory, result.name))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot create {directory}: {exc.strerror}", hint="choose another --plot directory"
        ) from None
    written: list[Path] = []
    for result in results:
        sides = [(side, values) for side, values in result.values.items() if values]
        if not sides:
            continue
        figure, (rounds, spread) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=(3, 2))
        summaries = result.summaries()
        for side, values in sides:
            (line,) = rounds.plot(range(1, len(values) + 1), values, marker="o", label=side)
            rounds.axhline(summaries[side].median, color=line.get_color(), linestyle="--")
        rounds.set_xlabel("round (in the order run)")
        rounds.set_ylabel(result.metric)
        rounds.set_title(f"{result.name}: rounds (dashed: median)")
        rounds.legend()
        spread.boxplot([values for _, values in sides], whis=(0, 100))
        spread.set_xticks(range(1, len(sides) + 1), [side for side, _ in sides])
        for index, (_, values) in enumerate(sides, 1):
            spread.scatter([index] * len(values), values, s=12, alpha=0.6)
        spread.set_title("distribution (whiskers: min - max)")
        figure.tight_layout()
        path = _plot_path(directory, result.name)
        # Drawn beside it and renamed: a full disk or Ctrl-C leaves the old plot.
        partial = path.with_name(f".{path.name}.partial")
        try:
            figure.savefig(partial, dpi=100, format="png", metadata={"Source": PLOT_SOURCE})
            partial.replace(path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise EnvironmentProblem(
                f"cannot write {path}: {exc.strerror}", hint="choose another --plot directory"
            ) from None
        finally:
            plt.close(figure)
        written.append(path)
    return written


def _plot_path(directory: Path, name: str) -> Path:
    """``DIR/<name>.png``, the name made safe (a name ending in .png gets no second one)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", name).removesuffix(".png").strip(".")
    return directory / f"{stem or 'benchmark'}.png"
