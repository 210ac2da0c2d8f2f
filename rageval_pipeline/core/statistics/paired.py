"""Paired statistics on per-query values: the one home for the gate and `rageval compare`.

- `bootstrap_ci`: percentile bootstrap interval of a mean (of per-query values, or of paired
  per-query differences). It draws the resample indices exactly as `scipy.stats.bootstrap` does
  (`rng.integers(0, n, (resamples, n))` from `numpy.random.default_rng(seed)`) and takes the same
  linear-interpolated percentiles, so with the same seed it reproduces scipy's
  `bootstrap(..., paired=True, method="percentile")` interval.
- `randomization_p`: the two-sided paired randomization (sign-flip) test of a mean difference
  (Fisher; Smucker, Allan & Carterette 2007). With at most `resamples` distinct sign vectors
  (2^n <= resamples) every one is enumerated and the p-value is exact, as in
  `scipy.stats.permutation_test(permutation_type="samples")`; otherwise random sign flips are
  drawn and the p-value counts the observed statistic too ((count + 1) / (resamples + 1)).
- `holm`: Holm-Bonferroni adjusted p-values across the measures of one comparison (Holm 1979).
- `minimum_detectable_effect`: the smallest mean difference a paired test at level `alpha`
  detects with probability `power` on n queries: (z(1 - alpha/2) + z(power)) * sd / sqrt(n),
  sd the standard deviation of the paired differences (what the test's noise is).

Everything is vectorised over resamples (in batches that bound memory), deterministic for a seed.
"""

from __future__ import annotations

from collections.abc import Hashable
from statistics import NormalDist
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
_K = TypeVar("_K", bound=Hashable)  # what tests are keyed by: a measure or its name
# Resampled values held in memory at once (8 bytes each).
_BATCH_VALUES = 1 << 22


def _batches(total: int, n: int) -> list[int]:
    size = max(1, _BATCH_VALUES // max(n, 1))
    return [min(size, total - start) for start in range(0, total, size)]


def bootstrap_cis(
    values: np.ndarray,
    confidences: tuple[float, ...],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[tuple[float, float]]:
    """Percentile bootstrap intervals of the mean of `values` at each confidence, all from the
    same resamples (so they nest); (NaN, NaN) each for fewer than 2 values."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2:
        return [(float("nan"), float("nan"))] * len(confidences)
    if np.all(x == x[0]):  # every resample has the same mean (a replayed run: all zeros)
        return [(float(x[0]), float(x[0]))] * len(confidences)
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [x[rng.integers(0, n, (size, n))].mean(axis=-1) for size in _batches(resamples, n)]
    )
    out = []
    for confidence in confidences:
        tail = (1 - confidence) / 2
        low, high = np.quantile(means, [tail, 1 - tail])
        out.append((float(low), float(high)))
    return out


def bootstrap_ci(
    values: np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 1 - DEFAULT_ALPHA,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (NaN, NaN for fewer than 2)."""
    [interval] = bootstrap_cis(values, (confidence,), resamples=resamples, seed=seed)
    return interval


def _sign_matrix(n: int) -> np.ndarray:
    """Every vector of n signs (+1/-1), one per row: 2^n rows."""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    return 1.0 - 2.0 * bits


def randomization_p(
    differences: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> float:
    """Two-sided p-value of the paired sign-flip test that the mean difference is 0."""
    d = np.asarray(differences, dtype=float)
    n = len(d)
    if n < 2:
        return float("nan")
    if not d.any():  # every sign vector gives 0: the observed 0 is as extreme as all of them
        return 1.0
    observed = d.mean()
    exact = 2**n <= resamples
    if exact:
        null = (_sign_matrix(n) * d).mean(axis=-1)
    else:
        rng = np.random.default_rng(seed)
        null = np.concatenate(
            [
                ((1 - 2 * rng.integers(0, 2, (size, n))) * d).mean(axis=-1)
                for size in _batches(resamples, n)
            ]
        )
    # scipy's tolerance for statistics equal in theory but not in floating point.
    gamma = abs(observed) * np.finfo(float).eps * 100
    extra = 0 if exact else 1
    less = (np.count_nonzero(null <= observed + gamma) + extra) / (len(null) + extra)
    greater = (np.count_nonzero(null >= observed - gamma) + extra) / (len(null) + extra)
    return float(np.clip(2 * min(less, greater), 0.0, 1.0))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN and does not count as a test)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    m = len(order)
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order]) if m else np.zeros(0)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def minimum_detectable_effect(
    sd: float, n: int, *, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER
) -> float:
    """Smallest true mean difference a two-sided paired test at `alpha` finds with `power`,
    for per-query differences of standard deviation `sd` over `n` queries (normal
    approximation)."""
    if n < 2:
        return float("nan")
    # The standard library's normal quantiles (as scipy.stats.norm.ppf, to 1e-15): importing
    # scipy.stats cost every Dagster job ~1.7 s (bench/README.md, warm re-run).
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return float(z * sd / np.sqrt(n))


class PairedTest(BaseModel):
    """A paired comparison of one measure: B - A over the queries both have."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int  # paired queries
    delta: float  # mean(B - A)
    ci_low: float | None  # percentile bootstrap interval of delta (None below 2 pairs)
    ci_high: float | None
    p_value: float | None  # two-sided randomization test
    p_holm: float | None = None  # adjusted across the measures compared together
    mde: float | None = None  # minimum detectable effect at this size (see `paired_test`)
    # The (1 - alpha/family) interval, Bonferroni across the `family` measures decided together:
    # what a claim of a difference beyond the band needs (core/gate/decision.py). Unset: as ci.
    family_low: float | None = None
    family_high: float | None = None
    # Set when the delta is a PPI++ estimate (core/statistics/ppi.py): the human-judged queries
    # alone would give this interval's width (n is then the LLM-judged population), and the same
    # delta on the human sample alone, beside it in the report.
    effective_n: float | None = None
    human_only: PairedTest | None = None
    level: float | None = None  # the confidence of [ci_low, ci_high], 1 - alpha (None: unknown)


def _finite(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    family: int = 1,
) -> PairedTest:
    """Mean difference B - A, its (1 - alpha) bootstrap interval (and the (1 - alpha/family)
    one from the same resamples), the randomization p-value and the minimum detectable effect,
    from aligned per-query values.

    The MDE's SD is that of the paired differences: the noise the paired test sees. Two
    correlated systems differ far less per query than either varies across queries, so the
    suite's SD would overstate it (2.4x for bm25 vs hybrid on nfcorpus, bench/README.md).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = b - a
    levels = (1 - alpha, 1 - alpha / max(family, 1))
    (low, high), (f_low, f_high) = bootstrap_cis(diff, levels, resamples=resamples, seed=seed)
    sd = np.std(diff, ddof=1) if len(a) > 1 else float("nan")
    return PairedTest(
        n=len(diff),
        delta=float(diff.mean()) if len(diff) else 0.0,
        ci_low=_finite(low),
        ci_high=_finite(high),
        p_value=_finite(randomization_p(diff, resamples=resamples, seed=seed)),
        mde=_finite(minimum_detectable_effect(sd, len(a), alpha=alpha, power=power)),
        family_low=_finite(f_low),
        family_high=_finite(f_high),
        level=1 - alpha,
    )


def with_holm(tests: dict[_K, PairedTest]) -> dict[_K, PairedTest]:
    """The same tests with `p_holm` set, adjusted across all of them."""
    names = list(tests)
    raw = np.array([np.nan if tests[m].p_value is None else tests[m].p_value for m in names])
    adjusted = holm(raw)
    return {
        m: tests[m].model_copy(update={"p_holm": _finite(adjusted[i])}) for i, m in enumerate(names)
    }
