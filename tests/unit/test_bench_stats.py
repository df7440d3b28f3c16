"""fdl.bench._stats against data sets whose figures were worked out by hand."""

from __future__ import annotations

import math

import pytest

from fdl.bench._stats import (
    MAD_SCALE,
    mad,
    median,
    outliers,
    percentile,
    ratio,
    scaled_mad,
    stddev,
    summarize,
)

# 1 2 3 4 100: median 3; |x - 3| = 2 1 0 1 97 -> sorted 0 1 1 2 97 -> MAD 1.
# mean 22; squared deviations 441 400 361 324 6084 = 7610; /4 = 1902.5.
SPIKED = [1.0, 2.0, 3.0, 4.0, 100.0]


def test_median_odd_and_even() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0


def test_mad_and_scaled_mad_of_a_spiked_set() -> None:
    assert mad(SPIKED) == 1.0
    assert scaled_mad(SPIKED) == pytest.approx(1.4826)
    assert MAD_SCALE == 1.4826


def test_stddev_is_inflated_by_the_spike_while_mad_is_not() -> None:
    assert stddev(SPIKED) == pytest.approx(math.sqrt(1902.5))
    assert stddev(SPIKED) > 25 * scaled_mad(SPIKED)
    assert stddev([5.0]) == 0.0


def test_outliers_beyond_k_scaled_mads() -> None:
    # |100 - 3| = 97 > 3 * 1.4826; |1 - 3| = 2 is not.
    assert outliers(SPIKED, k=3.0) == [4]
    # k = 1: threshold 1.4826; 1 (dev 2) and 100 are out, 2 and 4 (dev 1) are in.
    assert outliers(SPIKED, k=1.0) == [0, 4]
    # More than half equal: MAD 0, anything else is an outlier.
    assert outliers([5.0, 5.0, 5.0, 6.0]) == [3]
    assert outliers([]) == []


def test_percentile_matches_linear_interpolation() -> None:
    data = [1.0, 2.0, 3.0, 4.0]
    assert percentile(data, 0) == 1.0
    assert percentile(data, 100) == 4.0
    assert percentile(data, 50) == 2.5
    assert percentile(data, 25) == pytest.approx(1.75)
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile(data, 101)


def test_summarize_collects_everything() -> None:
    s = summarize(SPIKED)
    assert (s.n, s.median, s.mad, s.min, s.max, s.mean) == (5, 3.0, 1.0, 1.0, 100.0, 22.0)
    assert s.outliers == (4,)
    assert s.as_dict()["scaled_mad"] == pytest.approx(1.4826)


def test_ratio_of_constant_samples_has_a_degenerate_interval() -> None:
    r = ratio([10.0, 10.0, 10.0], [20.0, 20.0, 20.0])
    assert (r.value, r.low, r.high) == (2.0, 2.0, 2.0)


def test_ratio_interval_hand_checked() -> None:
    # a = [1]; a resample of b = [1, 3] has median 1, 2 or 3 (p = 1/4, 1/2, 1/4), so
    # the ratio's distribution is {1, 2, 3}; with 2000 resamples both 2.5 % tails
    # (50 draws each side) fall on the extremes: the 95 % interval is [1, 3].
    r = ratio([1.0], [1.0, 3.0], resamples=2000, seed=1)
    assert r.value == 2.0
    assert (r.low, r.high) == (1.0, 3.0)


def test_ratio_is_reproducible_and_contains_the_point_estimate() -> None:
    a = [100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5, 160.0]
    b = [110.0, 111.0, 109.0, 112.0, 108.0, 110.5, 109.5, 111.5]
    first = ratio(a, b, seed=7)
    assert first == ratio(a, b, seed=7)
    assert first.low <= first.value <= first.high
    # b is ~10 % slower; the interval excludes 1 and stays near 1.1 despite the spike.
    assert 1.0 < first.low < first.high < 1.2


def test_ratio_refuses_empty_and_zero_baselines() -> None:
    with pytest.raises(ValueError, match="baseline side"):
        ratio([], [1.0])
    with pytest.raises(ValueError, match="baseline median is 0"):
        ratio([0.0, 0.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        ratio([1.0], [1.0], confidence=1.0)


def test_the_paired_ratio_cancels_drift_that_the_unpaired_ratio_carries() -> None:
    from fdl.bench._stats import paired_ratio

    # Each round's load moves both sides alike; b is 1.1x a within every round.
    load = [1.0, 3.0, 1.5, 2.5, 1.2, 2.8, 1.1, 2.9, 1.3, 2.7]
    a = [10.0 * x for x in load]
    b = [11.0 * x for x in load]
    paired = paired_ratio(list(zip(a, b, strict=True)))
    unpaired = ratio(a, b)
    assert paired.value == pytest.approx(1.1)
    assert paired.high - paired.low == pytest.approx(0.0, abs=1e-12)
    assert unpaired.high - unpaired.low > 0.5
    with pytest.raises(ValueError, match="non-zero baseline"):
        paired_ratio([(0.0, 1.0)])
