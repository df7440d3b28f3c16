"""Robust statistics for benchmark rounds: pure functions, standard library only.

The median with the scaled MAD (MAD x 1.4826, the standard deviation's equivalent for
normal data) is what benchmarks report, because a GC pause or a scheduling spike moves
the mean and the standard deviation a lot and the median and MAD hardly at all. The
standard deviation is still reported so a reader can see how noisy the raw rounds were.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = [
    "MAD_SCALE",
    "Ratio",
    "Summary",
    "mad",
    "median",
    "outliers",
    "paired_ratio",
    "percentile",
    "ratio",
    "scaled_mad",
    "stddev",
    "summarize",
]

# 1 / Phi^-1(3/4): makes the MAD estimate sigma for normally distributed data.
MAD_SCALE = 1.4826


def _need(values: Sequence[float], what: str, at_least: int = 1) -> None:
    if len(values) < at_least:
        raise ValueError(f"{what} needs at least {at_least} value(s), got {len(values)}")


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    _need(values, "median")
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def mad(values: Sequence[float]) -> float:
    """The median absolute deviation from the median (unscaled)."""
    center = median(values)
    return median([abs(v - center) for v in values])


def scaled_mad(values: Sequence[float]) -> float:
    """MAD x 1.4826: a robust estimate of the standard deviation."""
    return mad(values) * MAD_SCALE


def stddev(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); 0.0 for a single value."""
    _need(values, "stddev")
    n = len(values)
    if n == 1:
        return 0.0
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def outliers(values: Sequence[float], k: float = 3.0) -> list[int]:
    """Indices of values farther than ``k`` scaled MADs from the median.

    When the scaled MAD is 0 (more than half the values equal), any value different
    from the median is an outlier.
    """
    if not values:
        return []
    center = median(values)
    spread = scaled_mad(values)
    return [i for i, v in enumerate(values) if abs(v - center) > k * spread]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, linear interpolation.

    Same definition as numpy's default (``linear``): position ``(n - 1) * q / 100``.
    """
    _need(sorted_values, "percentile")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True)
class Summary:
    """What a report shows for one side of a benchmark."""

    n: int
    median: float
    mad: float
    scaled_mad: float
    stddev: float
    mean: float
    min: float
    max: float
    outliers: tuple[int, ...]

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping: the fields, ``outliers`` as a list."""
        return {**asdict(self), "outliers": list(self.outliers)}


def summarize(values: Sequence[float], k: float = 3.0) -> Summary:
    """Median, MADs, standard deviation, mean, extremes and outliers of ``values``."""
    _need(values, "summarize")
    m = mad(values)
    return Summary(
        n=len(values),
        median=median(values),
        mad=m,
        scaled_mad=m * MAD_SCALE,
        stddev=stddev(values),
        mean=math.fsum(values) / len(values),
        min=float(min(values)),
        max=float(max(values)),
        outliers=tuple(outliers(values, k)),
    )


@dataclass(frozen=True)
class Ratio:
    """median(b) / median(a) with a percentile bootstrap confidence interval."""

    value: float
    low: float
    high: float
    confidence: float
    resamples: int

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping: the fields."""
        return asdict(self)


def ratio(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Ratio:
    """The ratio of medians ``median(b) / median(a)`` with a bootstrap CI.

    Each resample draws ``len(a)`` values from ``a`` and ``len(b)`` from ``b`` with
    replacement and takes the ratio of their medians; the interval is the central
    ``confidence`` part of those ratios (percentile method). Seeded, so a report is
    reproducible from its rounds.

    Raises:
        ValueError: a side is empty, a median of ``a`` is 0, or the parameters are
            out of range.
    """
    _need(a, "ratio (baseline side)")
    _need(b, "ratio (compared side)")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    base = median(a)
    if base == 0:
        raise ValueError("ratio: the baseline median is 0")
    rng = random.Random(seed)
    draws: list[float] = []
    for _ in range(resamples):
        ma = median(rng.choices(a, k=len(a)))
        mb = median(rng.choices(b, k=len(b)))
        # A resampled baseline median of 0 gives no ratio; skip it rather than divide.
        if ma != 0:
            draws.append(mb / ma)
    if not draws:
        raise ValueError("ratio: every resampled baseline median was 0")
    draws.sort()
    tail = (1.0 - confidence) / 2.0 * 100.0
    return Ratio(
        value=median(b) / base,
        low=percentile(draws, tail),
        high=percentile(draws, 100.0 - tail),
        confidence=confidence,
        resamples=resamples,
    )


def paired_ratio(
    pairs: Sequence[tuple[float, float]],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Ratio:
    """The median of the per-round ratios ``b / a`` of paired rounds, with a bootstrap CI.

    Rounds are paired by construction (each round runs every side, back to back), so
    what disturbed a round disturbed both of its sides: the ratio within a round
    cancels slow drift that the unpaired ratio of medians carries as noise. Each
    resample draws the pairs' ratios with replacement.

    Raises:
        ValueError: no pair with a non-zero baseline, or the parameters are out of range.
    """
    ratios = [b / a for a, b in pairs if a != 0 and math.isfinite(a) and math.isfinite(b)]
    _need(ratios, "paired ratio (pairs with a non-zero baseline)")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    rng = random.Random(seed)
    draws = sorted(median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    tail = (1.0 - confidence) / 2.0 * 100.0
    return Ratio(
        value=median(ratios),
        low=percentile(draws, tail),
        high=percentile(draws, 100.0 - tail),
        confidence=confidence,
        resamples=resamples,
    )
