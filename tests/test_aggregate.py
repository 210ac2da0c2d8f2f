"""Means, breakdowns by query attribute, latency statistics and seed 000's QualityReport."""

from __future__ import annotations

import pandas as pd
import pytest

from rageval_pipeline.core.measures import evaluate
from rageval_pipeline.core.measures.aggregate import (
    QualityReport,
    breakdown,
    latency_stats,
    mean_table,
    quality_report,
)
from rageval_pipeline.core.statistics.paired import bootstrap_ci

QUERIES = pd.DataFrame(
    {
        "query_id": ["q1", "q2", "q3", "q4"],
        "text": ["a", "b", "c", "d"],
        "intent": ["lookup", "lookup", "howto", None],
        "category": ["factual", "factual", "procedural", "procedural"],
        "difficulty": ["easy", "hard", "easy", "easy"],
        "query_type": ["specific", "broad", "specific", "broad"],
        "metadata": ["{}"] * 4,
    }
)


def per_query_table(rows: dict[str, list[float]]) -> pd.DataFrame:
    """{measure: values for q1..qn} as a long per-query table."""
    return pd.DataFrame(
        [(f"q{i + 1}", m, v) for m, values in rows.items() for i, v in enumerate(values)],
        columns=["query_id", "measure", "value"],
    )


def test_mean_table_keeps_measure_order():
    means = mean_table(per_query_table({"RR": [1.0, 0.5, 0.0], "P@5": [0.2, 0.4, 0.0]}))
    assert list(means["measure"]) == ["RR", "P@5"]
    assert list(means["value"]) == pytest.approx([0.5, 0.2])
    # Every mean carries its 95% percentile bootstrap interval (core.statistics.paired, fixed seed).
    assert list(means["ci_low"]) == pytest.approx([bootstrap_ci([1.0, 0.5, 0.0])[0], 0.0])
    assert all(means["ci_low"] <= means["value"]) and all(means["value"] <= means["ci_high"])


def test_breakdown_by_every_attribute_with_query_counts():
    table = breakdown(per_query_table({"RR": [1.0, 0.5, 0.0, 0.25]}), QUERIES)
    got = {(a, g): (v, n) for a, g, _, v, n, *_ in table.itertuples(index=False)}
    assert got[("category", "factual")] == (pytest.approx(0.75), 2)
    assert got[("category", "procedural")] == (pytest.approx(0.125), 2)
    assert got[("difficulty", "easy")] == (pytest.approx((1.0 + 0.0 + 0.25) / 3), 3)
    assert got[("intent", "lookup")] == (pytest.approx(0.75), 2)
    assert ("intent", "None") not in got  # q4 has no intent: left out of that attribute
    assert got[("query_type", "broad")] == (pytest.approx(0.375), 2)
    assert list(table.columns) == [
        "attribute",
        "group",
        "measure",
        "value",
        "n_queries",
        "ci_low",
        "ci_high",
    ]
    factual = table[table["group"] == "factual"].iloc[0]
    assert factual["ci_low"] <= factual["value"] <= factual["ci_high"]


def test_latency_percentiles_use_linear_interpolation_per_query():
    run = pd.DataFrame(
        {
            # q1 has two result rows carrying one latency; q4 returned nothing but was timed.
            "query_id": ["q1", "q1", "q2", "q3", "q4"],
            "doc_id": ["a", "b", "c", "d", None],
            "latency_ms": [10.0, 10.0, 20.0, 30.0, 40.0],
        }
    )
    stats = latency_stats(run, QUERIES)
    overall = stats[(stats["attribute"] == "all") & (stats["group"] == "all")]
    got = dict(zip(overall["stat"], overall["value"], strict=True))
    # Sorted 10, 20, 30, 40: the p-th percentile sits at position p/100 * 3 (0-based).
    assert got == pytest.approx(
        {"count": 4, "mean": 25.0, "p50": 25.0, "p95": 30 + 0.85 * 10, "p99": 30 + 0.97 * 10}
    )
    easy = stats[(stats["attribute"] == "difficulty") & (stats["group"] == "easy")]
    assert dict(zip(easy["stat"], easy["value"], strict=True))["p50"] == pytest.approx(30.0)
    assert latency_stats(run.assign(latency_ms=None), QUERIES).empty


def test_quality_report_from_an_evaluated_run():
    qrels = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q3"],
            "doc_id": ["a", "b", "c", "d"],
            "relevance": [1, 1, 1, 1],
        }
    )
    run = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q2", "q3"],
            "doc_id": ["a", "x", "y", "c", "z"],
            "score": [2.0, 1.0, 2.0, 1.0, 1.0],
        }
    )
    per_query = evaluate(qrels, run, ["P@5", "P@10", "R@10", "RR"])
    report = quality_report(per_query, QUERIES)
    assert isinstance(report, QualityReport)
    assert report.total_queries == 3
    assert report.mrr == pytest.approx((1 + 0.5 + 0) / 3)
    assert report.precision_at_5 == pytest.approx((1 / 5 + 1 / 5 + 0) / 3)
    assert report.recall_at_10 == pytest.approx((0.5 + 1 + 0) / 3)
    assert report.queries_with_no_relevant == 1
    assert report.by_category["factual"].query_count == 2
    assert report.by_category["factual"].mrr == pytest.approx(0.75)
    assert report.by_difficulty["easy"].recall_at_10 == pytest.approx(0.25)
    assert QualityReport.model_validate_json(report.model_dump_json()) == report


def test_quality_report_names_the_measures_it_needs():
    with pytest.raises(ValueError, match="R@10"):
        quality_report(per_query_table({"P@5": [1.0], "P@10": [1.0], "RR": [1.0]}), QUERIES)
