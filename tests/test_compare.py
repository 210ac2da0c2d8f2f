"""Paired comparison of two runs: tests, Holm correction, confidence intervals, determinism."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.core.statistics.compare import compare_runs, holm


def table(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(f"q{i}", m, v) for m, vs in values.items() for i, v in enumerate(vs)],
        columns=["query_id", "measure", "value"],
    )


def test_holm_by_hand():
    # Sorted 0.01, 0.02, 0.04 times 3, 2, 1 -> 0.03, 0.04, 0.04 (monotone), back in input order.
    assert list(holm(np.array([0.04, 0.01, 0.02]))) == pytest.approx([0.04, 0.03, 0.04])
    assert list(holm(np.array([0.5, 0.6]))) == pytest.approx([1.0, 1.0])
    assert np.isnan(holm(np.array([np.nan, 0.2]))[0]) and holm(np.array([np.nan, 0.2]))[1] == 0.2


def test_identical_runs_do_not_differ():
    a = table({"RR": [1.0, 0.5, 0.0, 0.25], "P@5": [0.2, 0.4, 0.0, 0.6]})
    result = compare_runs(a, a, permutations=500)
    assert list(result["delta"]) == [0.0, 0.0]
    assert list(result["p_ttest"]) == [1.0, 1.0]
    assert list(result["p_randomization"]) == pytest.approx([1.0, 1.0])


def test_randomization_with_two_queries_matches_the_exact_enumeration():
    # Differences +0.5, +0.5: of the 4 sign flips, 2 reach |mean| 0.5 -> p = 0.5.
    result = compare_runs(table({"RR": [0.5, 0.5]}), table({"RR": [1.0, 1.0]}), permutations=100)
    assert result["p_randomization"].iloc[0] == pytest.approx(0.5)
    assert result["delta"].iloc[0] == pytest.approx(0.5)


def test_a_clearly_better_run_is_significant_and_the_ci_covers_the_delta():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.6, 60)
    better = base + 0.2 + rng.normal(0, 0.05, 60)
    noise = base + rng.normal(0, 0.05, 60)
    a = table({"nDCG@10": list(base), "RR": list(base)})
    b = table({"nDCG@10": list(better), "RR": list(noise)})
    result = compare_runs(a, b, permutations=2000).set_index("measure")
    assert result.loc["nDCG@10", "p_randomization_holm"] < 0.01
    assert result.loc["nDCG@10", "p_ttest_holm"] < 0.01
    assert result.loc["nDCG@10", "ci_low"] < result.loc["nDCG@10", "delta"]
    assert result.loc["nDCG@10", "delta"] < result.loc["nDCG@10", "ci_high"]
    assert result.loc["nDCG@10", "ci_low"] > 0
    assert result.loc["RR", "p_ttest_holm"] >= result.loc["RR", "p_ttest"]
    assert int(result.loc["RR", "n_queries"]) == 60


def test_same_seed_same_p_values_and_only_shared_queries_are_paired():
    rng = np.random.default_rng(2)
    a = table({"RR": list(rng.random(20))})
    b = table({"RR": list(rng.random(20))})
    first = compare_runs(a, b, permutations=300, seed=5)
    pd.testing.assert_frame_equal(first, compare_runs(a, b, permutations=300, seed=5))
    fewer = compare_runs(a, b[b["query_id"] != "q0"], permutations=300)
    assert int(fewer["n_queries"].iloc[0]) == 19
