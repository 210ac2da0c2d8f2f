"""Paired statistics against scipy: bootstrap intervals, randomization p-values, Holm, MDE."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rageval_pipeline.core.statistics.paired import (
    bootstrap_ci,
    holm,
    minimum_detectable_effect,
    paired_test,
    randomization_p,
    with_holm,
)


def _paired(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.random(n)
    # Per-query measure values: bounded, with ties and zeros, as nDCG or P@k are.
    b = np.clip(a + rng.normal(-0.03, 0.15, n), 0, 1).round(2)
    return a, b


def _mean_diff(x, y, axis=-1):
    return np.mean(y - x, axis=axis)


@pytest.mark.parametrize(("n", "seed", "confidence"), [(10, 1, 0.95), (50, 2, 0.95), (323, 3, 0.9)])
def test_bootstrap_interval_is_scipys_paired_percentile_interval(n, seed, confidence):
    a, b = _paired(n, seed)
    ours = bootstrap_ci(b - a, resamples=10_000, seed=7, confidence=confidence)
    theirs = stats.bootstrap(
        (a, b),
        _mean_diff,
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=10_000,
        confidence_level=confidence,
        rng=np.random.default_rng(7),
    ).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), abs=1e-9)


def test_bootstrap_interval_does_not_depend_on_the_memory_batches(monkeypatch):
    a, b = _paired(200, 4)
    whole = bootstrap_ci(b - a, resamples=5_000, seed=3)
    monkeypatch.setattr("rageval_pipeline.core.statistics.paired._BATCH_VALUES", 200 * 7)
    assert bootstrap_ci(b - a, resamples=5_000, seed=3) == pytest.approx(whole, abs=1e-12)


@pytest.mark.parametrize(("n", "seed"), [(6, 5), (10, 6), (13, 7)])
def test_exact_randomization_p_is_scipys_exact_permutation_test(n, seed):
    # 2^n <= 10,000 sign vectors: both enumerate them all, so the p-values agree exactly.
    a, b = _paired(n, seed)
    theirs = stats.permutation_test(
        (a, b), _mean_diff, permutation_type="samples", vectorized=True, n_resamples=10_000
    ).pvalue
    assert randomization_p(b - a, resamples=10_000) == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize(("n", "seed", "shift"), [(50, 8, -0.03), (120, 9, 0.0), (323, 10, -0.02)])
def test_random_sign_flip_p_is_within_monte_carlo_error_of_scipy(n, seed, shift):
    a, b = _paired(n, seed)
    b = np.clip(b + shift, 0, 1)
    ours = randomization_p(b - a, resamples=20_000, seed=1)
    theirs = stats.permutation_test(
        (a, b),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=20_000,
        rng=np.random.default_rng(2),
    ).pvalue
    # Two independent Monte-Carlo estimates of one p: each has sd sqrt(p(1-p)/R) <= 0.0036
    # (two-sided doubles it), so 5 sd of their difference is 5 * sqrt(2) * 2 * 0.0036 ~ 0.05.
    assert abs(ours - theirs) < 5 * np.sqrt(2) * 2 * np.sqrt(theirs * (1 - theirs) / 20_000) + 1e-3


def test_randomization_p_sees_a_real_difference_and_no_difference():
    a, b = _paired(100, 11)
    assert randomization_p(np.full(100, -0.05)) < 0.001
    assert randomization_p(np.zeros(100)) == 1.0
    zeros = stats.permutation_test(
        (np.zeros(30), np.zeros(30)), _mean_diff, permutation_type="samples", vectorized=True
    )
    assert zeros.pvalue == 1.0
    constant = stats.bootstrap((np.full(30, 0.2),), np.mean, method="percentile", rng=0)
    assert bootstrap_ci(np.full(30, 0.2)) == pytest.approx(
        (constant.confidence_interval.low, constant.confidence_interval.high), abs=1e-9
    )
    assert randomization_p(b - a, seed=3) == randomization_p(b - a, seed=3)


def test_holm_lies_between_the_raw_p_and_bonferroni():
    p = np.array([0.001, 0.02, 0.03, 0.2, 0.04])
    adjusted = holm(p)
    assert np.all(adjusted >= p) and np.all(adjusted <= np.minimum(p * len(p), 1.0))
    # Holm's first step is Bonferroni's.
    assert adjusted[0] == pytest.approx(0.005)


def test_minimum_detectable_effect_formula_and_scaling():
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # 1.95996 + 0.84162 = 2.80158
    assert minimum_detectable_effect(0.2, 50) == pytest.approx(z * 0.2 / np.sqrt(50))
    # Four times the queries halve the smallest detectable drop.
    assert minimum_detectable_effect(0.2, 200) == pytest.approx(
        minimum_detectable_effect(0.2, 50) / 2
    )


def test_paired_test_puts_it_together_and_holm_adjusts_across_measures():
    a, b = _paired(60, 12)
    test = paired_test(a, b, resamples=2_000, seed=0)
    assert test.n == 60 and test.delta == pytest.approx(np.mean(b - a))
    assert test.ci_low < test.delta < test.ci_high
    adjusted = with_holm({"x": test, "y": test.model_copy(update={"p_value": 0.01})})
    assert adjusted["y"].p_holm == pytest.approx(0.02)
    assert adjusted["x"].p_holm >= test.p_value
    # The MDE's SD is that of the paired differences (what the paired test's noise is).
    assert test.mde == pytest.approx(minimum_detectable_effect(np.std(b - a, ddof=1), 60))
    assert test.mde < minimum_detectable_effect(np.std(a, ddof=1), 60)  # correlated systems
    # The family interval (Bonferroni over 3) comes from the same resamples: it nests the 95%.
    family = paired_test(a, b, resamples=2_000, seed=0, family=3)
    assert (family.ci_low, family.ci_high) == (test.ci_low, test.ci_high)
    low, high = stats.bootstrap(
        (a, b),
        _mean_diff,
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=2_000,
        confidence_level=1 - 0.05 / 3,
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert (family.family_low, family.family_high) == pytest.approx((low, high))
    assert family.family_low < test.ci_low and family.family_high > test.ci_high
    single = paired_test(a[:1], b[:1])
    assert single.ci_low is None and single.p_value is None
