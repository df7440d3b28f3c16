"""The bench statistics on data sets whose answers are known by hand."""

from __future__ import annotations

import statistics

import pytest

from fdl.bench import bootstrap_ratio, mad, median, outliers, scaled_mad, summarize


def test_median_and_mad_by_hand() -> None:
    data = [1.0, 1.0, 2.0, 2.0, 4.0, 6.0, 9.0]
    assert median(data) == 2.0
    # |x - 2| = 1 1 0 0 2 4 7 -> sorted 0 0 1 1 2 4 7 -> median 1
    assert mad(data) == 1.0
    assert scaled_mad(data) == pytest.approx(1.4826)
    assert median([3.0, 1.0, 2.0, 4.0]) == 2.5


def test_a_spike_inflates_the_stdev_but_not_the_scaled_mad() -> None:
    steady = [100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 101.0, 99.0, 100.0]
    spiked = [*steady[:-1], 400.0]  # one GC pause
    assert scaled_mad(spiked) == pytest.approx(scaled_mad(steady), abs=1.5)
    assert statistics.stdev(spiked) > 50 * statistics.stdev(steady) / 5
    summary = summarize(spiked)
    assert summary.outliers == (9,) and summary.median == 100.0
    assert summary.stdev > 10 * summary.scaled_mad


def test_no_outliers_when_there_is_no_spread() -> None:
    assert outliers([5.0, 5.0, 5.0, 5.0]) == []


def test_bootstrap_ratio_is_seeded_and_brackets_the_ratio() -> None:
    fast = [50.0, 51.0, 49.0, 50.5, 49.5, 50.0, 50.2, 49.8]
    slow = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 100.4, 99.6]
    ratio, low, high = bootstrap_ratio(fast, slow)
    assert ratio == pytest.approx(0.5, rel=0.01)
    assert low <= ratio <= high and high - low < 0.05
    assert bootstrap_ratio(fast, slow) == (ratio, low, high)  # same seed, same interval
    # identical samples: the interval is exactly 1
    same = [10.0] * 6
    assert bootstrap_ratio(same, same) == (1.0, 1.0, 1.0)


def test_errors() -> None:
    with pytest.raises(ValueError):
        median([])
    with pytest.raises(ValueError):
        bootstrap_ratio([1.0], [0.0])
