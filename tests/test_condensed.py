"""Condensed (judged-only) measures equal trec_eval's on the run filtered to judged documents."""

from __future__ import annotations

import pandas as pd
import pytest
import pytrec_eval
from hypothesis import given, settings

from rageval_pipeline.core.gate import category_of
from rageval_pipeline.core.measures import evaluate, parse_measure
from tests.test_measures_oracle import collections

PAIRS = {
    "nDCG(judged)@10": "ndcg_cut_10",
    "nDCG(judged)@3": "ndcg_cut_3",
    "P(judged)@5": "P_5",
    "R(judged)@3": "recall_3",
    "AP(judged)": "map",
    "RR(judged)": "recip_rank",
    "Rprec(judged)": "Rprec",
    "Success(judged)@1": "success_1",
}


def _nested(frame: pd.DataFrame, value: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for q, d, v in frame[["query_id", "doc_id", value]].itertuples(index=False):
        out.setdefault(q, {})[d] = v
    return out


@settings(max_examples=60, deadline=None)
@given(data=collections())
def test_condensed_measures_are_trec_eval_on_the_judged_only_run(data):
    qrels, run = data
    ours = evaluate(qrels, run, list(PAIRS))
    judged_pairs = set(zip(qrels["query_id"], qrels["doc_id"], strict=True))
    pairs = zip(run["query_id"], run["doc_id"], strict=True)
    filtered = run[[(q, d) in judged_pairs for q, d in pairs]]
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: {d: int(r) for d, r in v.items()} for q, v in _nested(qrels, "relevance").items()},
        set(PAIRS.values()),
    )
    theirs = evaluator.evaluate(_nested(filtered, "score"))
    judged = set(qrels.loc[qrels["relevance"] >= 1, "query_id"])
    assert set(ours["query_id"]) == judged
    for q, measure, value in ours.itertuples(index=False):
        # trec_eval drops a query whose condensed run is empty; we score it 0 (docs/measures.md).
        expected = theirs[q][PAIRS[measure]] if q in theirs else 0.0
        assert value == pytest.approx(expected, abs=1e-9), (q, measure)


def test_unjudged_documents_lower_the_standard_measure_but_not_the_condensed_one():
    qrels = pd.DataFrame({"query_id": ["q"] * 2, "doc_id": ["a", "b"], "relevance": [1, 0]})
    run = pd.DataFrame(
        {"query_id": ["q"] * 4, "doc_id": ["x", "y", "a", "b"], "score": [4.0, 3.0, 2.0, 1.0]}
    )
    values = evaluate(qrels, run, ["RR", "RR(judged)", "Judged@4"]).set_index("measure")["value"]
    assert values["RR"] == pytest.approx(1 / 3)
    assert values["RR(judged)"] == 1.0
    assert values["Judged@4"] == 0.5


def test_condensed_names_parse_and_print_canonically():
    assert str(parse_measure("nDCG@10(judged)")) == "nDCG(judged)@10"
    assert parse_measure("P(judged,rel=2)@5").judged
    assert category_of(parse_measure("nDCG(judged)@10")) == "ranking_shift"
