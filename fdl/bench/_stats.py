"""Statistics with honest variance: robust centre and spread, outliers, ratio intervals.

Pure functions of lists of floats (standard library only). The median and the scaled MAD
(MAD x 1.4826, the sigma-equivalent of a normal distribution) describe a benchmark that
has GC pauses and scheduling spikes better than the mean and the standard deviation, which
are reported too, so both views are there.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MAD_SCALE",
    "Summary",
    "bootstrap_ratio",
    "mad",
    "median",
    "outliers",
    "scaled_mad",
    "summarize",
]

MAD_SCALE = 1.4826  # 1 / Phi^-1(3/4): a normal distribution's MAD times this is its sigma


def median(values: Sequence[float]) -> float:
    """The median (the mean of the two middle values for an even count).

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def mad(values: Sequence[float]) -> float:
    """The median absolute deviation from the median."""
    centre = median(values)
    return median([abs(v - centre) for v in values])


def scaled_mad(values: Sequence[float]) -> float:
    """:func:`mad` x 1.4826: comparable to a standard deviation, robust to spikes."""
    return mad(values) * MAD_SCALE


def outliers(values: Sequence[float], k: float = 3.0) -> list[int]:
    """Indices of values more than ``k`` scaled MADs from the median (none when the scaled
    MAD is 0: a spread of zero cannot call anything an outlier)."""
    centre, spread = median(values), scaled_mad(values)
    if spread == 0:
        return []
    return [i for i, v in enumerate(values) if abs(v - centre) > k * spread]


@dataclass(frozen=True)
class Summary:
    """One sample of rounds, summarised."""

    n: int
    median: float
    scaled_mad: float
    mean: float
    stdev: float
    minimum: float
    maximum: float
    outliers: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "n": self.n,
            "median": self.median,
            "scaled_mad": self.scaled_mad,
            "mean": self.mean,
            "stdev": self.stdev,
            "min": self.minimum,
            "max": self.maximum,
            "outliers": list(self.outliers),
        }


def summarize(values: Sequence[float], *, k: float = 3.0) -> Summary:
    """Median, scaled MAD, mean, sample standard deviation, extremes and outliers."""
    if not values:
        raise ValueError("summary of no values")
    data = [float(v) for v in values]
    return Summary(
        n=len(data),
        median=median(data),
        scaled_mad=scaled_mad(data),
        mean=statistics.fmean(data),
        stdev=statistics.stdev(data) if len(data) > 1 else 0.0,
        minimum=min(data),
        maximum=max(data),
        outliers=tuple(outliers(data, k)),
    )


def bootstrap_ratio(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The ratio of medians ``numerator / denominator`` and a percentile bootstrap interval.

    Each resample draws both samples with replacement; the interval is the
    ``(1-confidence)/2`` and ``(1+confidence)/2`` quantiles of the resampled ratios. The
    generator is seeded, so the same data give the same interval.

    Returns:
        (ratio, low, high).

    Raises:
        ValueError: an empty sample, or a denominator whose median is 0.
    """
    if not numerator or not denominator:
        raise ValueError("a ratio needs values on both sides")
    base = median(denominator)
    if base == 0:
        raise ValueError("the denominator's median is 0")
    ratio = median(numerator) / base
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        top = median(rng.choices(numerator, k=len(numerator)))
        bottom = median(rng.choices(denominator, k=len(denominator)))
        if bottom != 0:
            ratios.append(top / bottom)
    ratios.sort()
    low_index = max(0, math.floor((1 - confidence) / 2 * len(ratios)))
    high_index = min(len(ratios) - 1, math.ceil((1 + confidence) / 2 * len(ratios)) - 1)
    return ratio, ratios[low_index], ratios[high_index]
