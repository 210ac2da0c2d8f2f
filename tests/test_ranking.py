"""trec_eval's ordering rule: score descending, then doc id descending (byte order)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.core.io.ranking import order_run, top_k


def test_ties_are_broken_by_doc_id_descending_and_ranks_restart_per_query():
    run = pd.DataFrame(
        {
            "query_id": ["q2", "q1", "q1", "q1", "q2"],
            "doc_id": ["a", "b", "C", "a", "z"],
            "score": [1.0, 2.0, 2.0, 3.0, 1.0],
        }
    )
    out = order_run(run)
    assert out[["query_id", "doc_id"]].values.tolist() == [
        ["q1", "a"],
        ["q1", "b"],  # "b" > "C" in byte order, as strcmp compares
        ["q1", "C"],
        ["q2", "z"],
        ["q2", "a"],
    ]
    assert out["rank"].tolist() == [1, 2, 3, 1, 2]


def test_a_query_without_results_keeps_its_row_last_with_a_null_rank():
    run = pd.DataFrame(
        {
            "query_id": ["q1", "q0", "q1"],
            "doc_id": ["d1", None, "d2"],
            "score": [0.5, None, 0.7],
            "latency_ms": [3.0, 1.0, 3.0],
        }
    )
    out = order_run(run)
    assert out["doc_id"].tolist()[1:] == ["d2", "d1"]
    assert out["rank"].isna().tolist() == [True, False, False]
    assert out.loc[0, "latency_ms"] == 1.0


def test_order_does_not_depend_on_input_order():
    rng = np.random.default_rng(7)
    run = pd.DataFrame(
        {
            "query_id": rng.choice(["q1", "q2", "q3"], 300),
            "doc_id": [f"d{i}" for i in range(300)],
            "score": rng.integers(0, 4, 300).astype(float),  # many ties
        }
    )
    first = order_run(run)
    second = order_run(run.sample(frac=1.0, random_state=1))
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.parametrize("positive_only", [False, True])
def test_top_k_ranks_ties_at_the_cut_by_id(positive_only):
    ids = np.asarray(["a", "c", "b", "d", "e"], dtype=object)
    scores = np.array([1.0, 1.0, 1.0, 2.0, 0.0])
    assert top_k(scores, ids, 2, positive_only=positive_only) == [3, 1]  # d, then c (> b > a)
    everything = top_k(scores, ids, 10, positive_only=positive_only)
    assert everything == ([3, 1, 2, 0] if positive_only else [3, 1, 2, 0, 4])
