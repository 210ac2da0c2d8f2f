"""The anytime-valid confidence sequence: it covers the true mean delta at every nightly look at
once, where an ordinary interval recomputed each night does not."""

from __future__ import annotations

import numpy as np

from rageval_pipeline.core.sequential import confidence_sequence

SEEDS, NIGHTS, PER_NIGHT = 500, 30, 20  # 20 new paired queries judged every night


def test_peeking_every_night_keeps_the_coverage_that_a_nightly_interval_loses():
    rng = np.random.default_rng(0)
    true_mean = -0.02
    deltas = rng.normal(true_mean, 0.3, (SEEDS, NIGHTS * PER_NIGHT))
    looks = np.arange(PER_NIGHT - 1, NIGHTS * PER_NIGHT, PER_NIGHT)
    low, high = confidence_sequence(deltas, planned=NIGHTS * PER_NIGHT)
    always = ((low[:, looks] <= true_mean) & (true_mean <= high[:, looks])).all(axis=1)

    t = np.arange(1, NIGHTS * PER_NIGHT + 1)
    mean = np.cumsum(deltas, axis=1) / t
    half = 1.959964 * deltas.std(axis=1, keepdims=True) / np.sqrt(t)  # a fixed-n interval
    nightly = (np.abs(mean - true_mean) <= half)[:, looks].all(axis=1)
    print(f"covered at all {NIGHTS} looks: sequence {always.mean()}, nightly {nightly.mean()}")
    assert always.mean() >= 0.95
    assert nightly.mean() <= 0.8


def test_each_row_is_its_own_sequence_and_it_starts_at_two_deltas():
    rng = np.random.default_rng(1)
    deltas = rng.normal(0, 0.2, (3, 50))
    low, high = confidence_sequence(deltas, planned=50)
    one_low, one_high = confidence_sequence(deltas[1], planned=50)
    np.testing.assert_array_equal(low[1], one_low)
    np.testing.assert_array_equal(high[1], one_high)
    assert np.isnan(low[:, 0]).all() and not np.isnan(low[:, 1:]).any()
    width = high - low
    assert (width[:, -1] < 0.6 * width[:, 9]).all()  # it narrows as deltas accumulate
