"""Comparing two runs measure by measure on paired per-query values.

For each measure: the mean difference (B - A) with a t-based 95% confidence interval, a paired
t-test and a paired randomization test (random sign flips of the per-query differences, fixed
seed; Smucker, Allan & Carterette 2007), both two-sided, each Holm-corrected across the measures
compared (Holm 1979), so that testing many measures does not inflate false alarms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

COLUMNS = [
    "measure",
    "n_queries",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "p_ttest",
    "p_randomization",
    "p_ttest_holm",
    "p_randomization_holm",
]


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


def _paired(a: np.ndarray, b: np.ndarray, permutations: int, rng: np.random.Generator) -> dict:
    diff = b - a
    n = len(diff)
    row = {"n_queries": n, "mean_a": a.mean(), "mean_b": b.mean(), "delta": diff.mean()}
    if n < 2:
        return row | dict.fromkeys(("ci_low", "ci_high", "p_ttest", "p_randomization"), np.nan)
    randomized = stats.permutation_test(
        (b, a),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        alternative="two-sided",
        rng=rng,
    )
    if np.all(diff == diff[0]):  # no spread: t is undefined, its limit is not
        return row | {
            "ci_low": diff[0],
            "ci_high": diff[0],
            "p_ttest": 1.0 if diff[0] == 0 else 0.0,
            "p_randomization": randomized.pvalue,
        }
    test = stats.ttest_rel(b, a)
    ci = test.confidence_interval(0.95)
    return row | {
        "ci_low": ci.low,
        "ci_high": ci.high,
        "p_ttest": test.pvalue,
        "p_randomization": randomized.pvalue,
    }


def compare_runs(
    per_query_a: pd.DataFrame,
    per_query_b: pd.DataFrame,
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired comparison of two per-query tables (query_id, measure, value); one row a measure.

    Only queries present in both tables for a measure are paired (`n_queries`); `delta` is
    mean(B - A). Measures come in A's order. Same inputs and seed give the same p-values.
    """
    paired = per_query_a.merge(
        per_query_b, on=["query_id", "measure"], suffixes=("_a", "_b"), sort=False
    )
    rows = []
    for measure, part in paired.groupby("measure", sort=False):
        rng = np.random.default_rng(seed)  # per measure: its p-value ignores the others
        a, b = part["value_a"].to_numpy(float), part["value_b"].to_numpy(float)
        rows.append({"measure": str(measure)} | _paired(a, b, permutations, rng))
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if not c.endswith("_holm")])
    frame["p_ttest_holm"] = holm(frame["p_ttest"].to_numpy(float))
    frame["p_randomization_holm"] = holm(frame["p_randomization"].to_numpy(float))
    return frame.astype({"measure": str, "n_queries": np.int64})[COLUMNS]
