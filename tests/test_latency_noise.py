"""Latency against the baseline configuration timed beside the run: a rise blocks only when
the interleaved pairs establish it (issue 36). The sign-test bound is checked against scipy;
the pairs' rows come from the real aggregation of a run table; the decision from `decide`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from rageval_pipeline.core.gate import decide
from rageval_pipeline.core.gate.baselines import baseline_from_summary
from rageval_pipeline.core.gate.models import RunSummary
from rageval_pipeline.core.gate.policy import GatePolicy
from rageval_pipeline.core.measures.aggregate import latency_stats
from rageval_pipeline.core.statistics.median_bound import median_lower_bound


@pytest.mark.parametrize("n", [5, 6, 10, 23, 50, 200])
def test_the_bound_is_the_sign_tests_order_statistic(n):
    values = np.random.default_rng(n).lognormal(size=n)
    bound = median_lower_bound(values)
    k = int(np.searchsorted(np.sort(values), bound)) + 1  # the bound is the k-th smallest
    # Fewer than k values below the median is a 5% event under H0 (median = bound); k is the
    # largest such rank, as scipy's exact binomial test says.
    assert binomtest(k - 1, n, 0.5, alternative="less").pvalue <= 0.05
    assert binomtest(k, n, 0.5, alternative="less").pvalue > 0.05
    assert median_lower_bound(values[:4]) is None  # 4 values: no 95% bound exists


def test_the_run_table_gives_each_group_its_pairs():
    ratios = np.array([1.0, 1.2, 0.8, 1.1, 0.9, 1.05, 0.95, 1.3, 0.7, 1.0, 1.15, 0.85])
    run = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(len(ratios))],
            "latency_ms": 100.0 * ratios,
            "baseline_latency_ms": 100.0,
        }
    )
    queries = pd.DataFrame({"query_id": run["query_id"], "intent": ["a", "b"] * 6})
    rows = latency_stats(run, queries, attributes=("intent",))
    paired = rows[rows["timed"] == "paired"].set_index(["group", "stat"])["value"]
    assert paired[("all", "pairs")] == 12
    assert paired[("all", "ratio_p50")] == pytest.approx(np.exp(np.median(np.log(ratios))))
    assert paired[("all", "ratio_low")] == pytest.approx(np.exp(median_lower_bound(np.log(ratios))))
    assert paired[("a", "pairs")] == 6


def _run(p50: float, pairs: dict | None) -> RunSummary:
    return RunSummary(
        dataset="techdocs",
        split="test",
        system="dense",
        fingerprint="cfg",
        run_id="r",
        created_at="2026-11-28T10:00:00+00:00",
        measures={"nDCG@10": 0.5},
        latency={"all": {"p50": p50, "p95": p50 * 2}},
        latency_queries={"all": 50},
        n_queries=50,
        baseline_latency={"all": {"p50": 290.0, "p95": 580.0}},
        latency_pairs={} if pairs is None else {"all": pairs},
    )


def _latency_check(run: RunSummary):
    base = baseline_from_summary(_run(290.0, None))
    verdict = decide([run], {("techdocs", "dense"): base}, GatePolicy())
    return verdict, next(c for c in verdict.checks if c.kind == "latency_baseline")


def test_a_rise_the_pairs_do_not_establish_is_inconclusive_not_blocking():
    # The case: p50 608 ms against 290 ms, but per query the two are alike.
    pairs = {"pairs": 50.0, "ratio_p50": 1.04, "ratio_low": 0.97}
    verdict, check = _latency_check(_run(608.0, pairs))
    assert verdict.passed and not check.passed and not check.blocking and check.inconclusive
    assert check.category is None
    assert (
        "inconclusive: the per-query ratio over 50 interleaved pairs is x1.04 (95% lower "
        "bound x0.97, within +50%)" in check.message
    )


def test_a_rise_the_pairs_establish_blocks():
    pairs = {"pairs": 50.0, "ratio_p50": 2.1, "ratio_low": 1.8}
    verdict, check = _latency_check(_run(608.0, pairs))
    assert not verdict.passed and check.blocking and verdict.categories == ["latency_regression"]
    assert (
        "the per-query ratio over 50 interleaved pairs is x2.10 (95% lower bound x1.80, "
        "beyond +50%)" in check.message
    )


def test_without_enough_pairs_the_percentiles_decide_as_before():
    few = {"pairs": 6.0, "ratio_p50": 1.0, "ratio_low": 0.5}
    for pairs in (None, few):
        verdict, check = _latency_check(_run(608.0, pairs))
        assert check.blocking and not verdict.passed
