"""Every measure trec_eval also computes agrees with pytrec_eval (trec_eval's C code) to 1e-9.

Random qrels and runs with tied scores, graded labels 0-3, unjudged documents, documents judged
0, rows in any order. Queries that retrieved nothing are left out here: trec_eval drops them,
we score them 0 (tested in test_measures.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.io.formats import read_ranked_run
from rageval_pipeline.core.io.ranking import RankedRun
from rageval_pipeline.core.measures import evaluate, unjudged_queries

CUTOFFS = (1, 3, 5, 10)
DOCS = [f"d{i}" for i in range(12)]
# Ids whose byte order trec_eval's tie-break reads past 8 bytes, a prefix and a length.
LONG_DOCS = ["doc-0000000001", "doc-00000000010", "doc-0000000002", "doc-000000000", "é-1", "d"]
# Query ids whose sorted union (byte order, as Arrow sorts it, is Python's code point order)
# differs from the order they come in: prefixes, digits, case, past 8 bytes, beyond ASCII.
QUERIES = ["q1", "q10", "q2", "Q", "é", "query-0000000001", "query-00000000010"]


def _ours_and_trec(rel: int) -> dict[str, str]:
    """Our measure name -> pytrec_eval name, at relevance threshold `rel`."""
    suffix = "" if rel == 1 else f"(rel={rel})"
    pairs = {f"RR{suffix}": "recip_rank", f"AP{suffix}": "map", f"Rprec{suffix}": "Rprec"}
    for k in CUTOFFS:
        pairs[f"P{suffix}@{k}"] = f"P_{k}"
        pairs[f"R{suffix}@{k}"] = f"recall_{k}"
        pairs[f"AP{suffix}@{k}"] = f"map_cut_{k}"
        pairs[f"Success{suffix}@{k}"] = f"success_{k}"
        pairs[f"nDCG@{k}"] = f"ndcg_cut_{k}"  # trec_eval's ndcg ignores the threshold
    return pairs


@st.composite
def collections(draw, docs=DOCS):
    queries = draw(st.lists(st.sampled_from(QUERIES), unique=True, min_size=1, max_size=4))
    qrels, run = [], []
    for q in queries:
        judged = draw(st.lists(st.sampled_from(docs), unique=True, max_size=8))
        qrels += [(q, d, draw(st.integers(0, 3))) for d in judged]
        retrieved = draw(st.lists(st.sampled_from(docs), unique=True, min_size=1, max_size=12))
        # Few distinct scores, so ties (broken by doc id, descending) are common.
        run += [(q, d, float(draw(st.integers(0, 4)))) for d in retrieved]
    order = draw(st.permutations(range(len(run))))
    if draw(st.booleans()):  # also the grouped, score-sorted layout retrievers write
        order = sorted(range(len(run)), key=lambda i: (run[i][0], -run[i][2]))
    if draw(st.booleans()):  # qrels not grouped by query either
        qrels = [qrels[i] for i in draw(st.permutations(range(len(qrels))))]
    qrels_df = pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"])
    run_df = pd.DataFrame([run[i] for i in order], columns=["query_id", "doc_id", "score"])
    return qrels_df, run_df


def _pytrec_values(qrels: pd.DataFrame, run: pd.DataFrame, names: set[str], rel: int) -> dict:
    trec_qrels: dict[str, dict[str, int]] = {}
    for q, d, r in qrels.itertuples(index=False):
        trec_qrels.setdefault(q, {})[d] = int(r)
    trec_run: dict[str, dict[str, float]] = {}
    for q, d, s in run.itertuples(index=False):
        trec_run.setdefault(q, {})[d] = s
    evaluator = pytrec_eval.RelevanceEvaluator(trec_qrels, names, relevance_level=rel)
    return evaluator.evaluate(trec_run)


def _assert_agrees(ours: pd.DataFrame, theirs: dict, qrels: pd.DataFrame, pairs: dict) -> None:
    judged = set(qrels.loc[qrels["relevance"] >= 1, "query_id"])
    assert set(ours["query_id"]) == judged  # every judged query, retrieved or not
    compared = 0
    for q, measure, value in ours.itertuples(index=False):
        if q in theirs:  # all random queries retrieve something, so all judged ones are here
            assert value == pytest.approx(theirs[q][pairs[measure]], abs=1e-9), (q, measure)
            compared += 1
    assert compared == len(judged) * len(pairs)


@pytest.mark.parametrize("rel", [1, 2])
@settings(max_examples=60, deadline=None)
@given(data=collections())
def test_agrees_with_pytrec_eval(rel, data):
    qrels, run = data
    pairs = _ours_and_trec(rel)
    ours = evaluate(qrels, run, list(pairs))
    _assert_agrees(ours, _pytrec_values(qrels, run, set(pairs.values()), rel), qrels, pairs)
    seen = set(qrels["query_id"]) | set(run["query_id"])
    judged = set(qrels.loc[qrels["relevance"] >= 1, "query_id"])
    assert unjudged_queries(qrels, run) == sorted(seen - judged)


@pytest.mark.parametrize("form", ["trec", "parquet", "parquet-dictionary"])
@settings(max_examples=60, deadline=None)
@given(data=collections(DOCS + LONG_DOCS))
def test_a_file_with_tied_scores_read_for_scoring_agrees_with_pytrec_eval(
    tmp_path_factory, form, data
):
    """The reader's own tie-break (the tied rows of a TREC or Parquet run, ordered by doc id
    descending in byte order) gives trec_eval's values, ids past 8 bytes and prefixes too."""
    qrels, run = data
    path = tmp_path_factory.mktemp("run") / f"run.{form}"
    if form == "parquet":
        run.to_parquet(path, index=False)
    elif form == "parquet-dictionary":  # ids stored as Arrow dictionaries
        run.astype({"query_id": "category", "doc_id": "category"}).to_parquet(path, index=False)
    else:
        rows = run.itertuples(index=False)
        path.write_text("".join(f"{q} Q0 {d} 1 {s!r} t\n" for q, d, s in rows))
    pairs = _ours_and_trec(1)
    ranked = read_ranked_run(path)
    assert isinstance(ranked, RankedRun)
    ours = evaluate(qrels, ranked, list(pairs))
    _assert_agrees(ours, _pytrec_values(qrels, run, set(pairs.values()), 1), qrels, pairs)


@settings(max_examples=40, deadline=None)
@given(data=collections(), collide=st.booleans())
def test_a_trec_file_read_for_scoring_scores_like_its_table(tmp_path_factory, data, collide):
    """A reader's RankedRun (checked, ordered, its pair keys reused by the engine) gives the
    values of the same rows as a table, fingerprint collisions included."""
    qrels, run = data
    path = tmp_path_factory.mktemp("run") / "run.trec"
    path.write_text("".join(f"{q} Q0 {d} 1 {s!r} t\n" for q, d, s in run.itertuples(index=False)))
    measures = [*_ours_and_trec(1), "nDCG(judged)@5"]
    expected = evaluate(qrels, run, measures)
    with pytest.MonkeyPatch.context() as patch:
        # Every pair key equal: the reader keeps none when a query has two rows (it checks
        # them within each query; keys equal across queries are told apart by the join's id
        # check), and the engine joins exactly.
        if collide:

            def zeros(query, doc, query_index=None, starts=None):
                return np.zeros(len(doc), dtype=np.uint64)

            patch.setattr("rageval_pipeline.core.io.delimited.pair_keys", zeros)
            patch.setattr("rageval_pipeline.core.measures.join.pair_keys", zeros)
        ranked = read_ranked_run(path)
        assert isinstance(ranked, RankedRun)
        if not collide:
            assert ranked.pair_keys is not None
        elif run["query_id"].duplicated().any():
            assert ranked.pair_keys is None
        pd.testing.assert_frame_equal(evaluate(qrels, ranked, measures), expected)
    assert unjudged_queries(qrels, ranked) == unjudged_queries(qrels, run)
