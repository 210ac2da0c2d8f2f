"""Measure names, the seeds' worked examples, and the rules written in docs/measures.md."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import pytrec_eval

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import keys
from rageval_pipeline.core.io.formats import read_keyed_qrels
from rageval_pipeline.core.io.ranking import order_run
from rageval_pipeline.core.measures import (
    FAMILIES,
    evaluate,
    parse_measure,
    to_document_level,
    unjudged_queries,
)
from rageval_pipeline.core.measures.join import Judgments


def qrels_of(*rows: tuple[str, str, int]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])


def run_of(*rows: tuple) -> pd.DataFrame:
    """(query, doc, score) or (query, doc, score, source) rows."""
    columns = ["query_id", "doc_id", "score", "source_id"][: len(rows[0])]
    return pd.DataFrame(rows, columns=columns)


def ranked(query: str, docs: list[str], source: list[str] | None = None) -> pd.DataFrame:
    """A run for one query in the given order (scores strictly decreasing)."""
    rows = {
        "query_id": query,
        "doc_id": docs,
        "score": [float(len(docs) - i) for i in range(len(docs))],
    }
    if source is not None:
        rows["source_id"] = source
    return pd.DataFrame(rows)


def value(per_query: pd.DataFrame, measure: str, query: str = "q1") -> float:
    hit = per_query[(per_query["measure"] == measure) & (per_query["query_id"] == query)]
    assert len(hit) == 1, (measure, query)
    return float(hit["value"].iloc[0])


# Names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("P@5", "P@5"),
        ("P(rel=2)@5", "P(rel=2)@5"),
        ("precision@5", "P@5"),
        ("Recall@100", "R@100"),
        ("MRR", "RR"),
        ("MRR@10", "RR@10"),
        ("MAP", "AP"),
        ("map@100", "AP@100"),
        ("NDCG@10", "nDCG@10"),
        ("nDCG@10(gain=exp)", "nDCG(gain=exp)@10"),
        ("nDCG(gain=lin)@10", "nDCG@10"),
        ("HitRate@10", "Success@10"),
        ("Rprec", "Rprec"),
        ("Judged@10", "Judged@10"),
        ("ER(rel=2)@5", "ER(rel=2)@5"),
        ("diversity@10", "Diversity@10"),
        ("Clustering@10", "Clustering@10"),
        ("F1@10", "F1@10"),
    ],
)
def test_names_parse_to_canonical_and_round_trip(written, canonical):
    measure = parse_measure(written)
    assert str(measure) == canonical
    assert parse_measure(str(measure)) == measure


def test_every_family_has_a_documented_definition():
    for name, family in FAMILIES.items():
        assert family.__doc__ and len(family.__doc__) > 40, name


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("P", "needs a cutoff"),
        ("Rprec@5", "takes no cutoff"),
        ("Diversity(rel=2)@5", "no parameter 'rel'"),
        ("P(gain=exp)@5", "no parameter 'gain'"),
        ("P(rel=0)@5", "greater than or equal to 1"),
        ("nDCG(gain=log)@5", "gain"),
        ("Bleu@4", "unknown measure"),
        ("P@five", "cannot parse"),
        ("P(rel=2)@5(rel=3)", "two parameter lists"),
    ],
)
def test_bad_names_raise_one_clear_input_error(bad, words):
    with pytest.raises(InputError) as raised:
        parse_measure(bad)
    assert words in str(raised.value)
    assert raised.value.field == "measure"


# Seeds' worked examples ----------------------------------------------------------------------


def test_mrr_over_first_relevant_ranks_1_2_5_is_0_567():
    """Seed 000 12.1: first relevant at ranks 1, 2 and 5 -> (1 + 0.5 + 0.2) / 3."""
    qrels = qrels_of(("a", "rel-a", 1), ("b", "rel-b", 1), ("c", "rel-c", 1))
    run = pd.concat(
        [
            ranked("a", ["rel-a", "x1", "x2"]),
            ranked("b", ["x1", "rel-b", "x2"]),
            ranked("c", ["x1", "x2", "x3", "x4", "rel-c"]),
        ]
    )
    per_query = evaluate(qrels, run, ["MRR"])
    assert per_query["value"].mean() == pytest.approx(0.567, abs=1e-3)


def test_ndcg_of_labels_3_1_2_is_0_97_with_linear_gain():
    """Seed 001 4.4: DCG = 3 + 1/log2(3) + 2/2, ideal [3, 2, 1]; the seed's rel_i is linear."""
    qrels = qrels_of(("q1", "A", 3), ("q1", "B", 1), ("q1", "C", 2))
    per_query = evaluate(qrels, ranked("q1", ["A", "B", "C"]), ["nDCG@3", "nDCG(gain=exp)@3"])
    dcg = 3 + 1 / math.log2(3) + 2 / math.log2(4)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert value(per_query, "nDCG@3") == pytest.approx(dcg / ideal, abs=1e-12)
    assert round(value(per_query, "nDCG@3"), 2) == 0.97
    exp_dcg = 7 + 1 / math.log2(3) + 3 / 2
    exp_ideal = 7 + 3 / math.log2(3) + 1 / 2
    assert value(per_query, "nDCG(gain=exp)@3") == pytest.approx(exp_dcg / exp_ideal, abs=1e-12)


def test_seed_001_recall_at_5_counts_distinct_relevant_entities_among_chunks():
    """Seed 001 8.2: 3 of 5 relevant entities among the top-5 chunks -> ER@5 = 0.6."""
    qrels = qrels_of(*[("q1", f"relevant-{i}", 1) for i in range(1, 6)])
    sources = ["relevant-1", "irrelevant", "relevant-2", "irrelevant", "relevant-3"]
    run = ranked("q1", [f"{s}:chunk:{i}" for i, s in enumerate(sources)], sources)
    assert value(evaluate(qrels, run, ["ER@5"]), "ER@5") == pytest.approx(0.6)


def test_entity_recall_differs_from_recall_on_the_document_level_run():
    """Two chunks of one document use two of the k places for ER, one for R after collapsing."""
    qrels = qrels_of(("q1", "A", 1), ("q1", "B", 1))
    run = ranked("q1", ["A:0", "A:1", "B:0"], ["A", "A", "B"])
    assert value(evaluate(qrels, run, ["ER@2"]), "ER@2") == pytest.approx(0.5)
    documents = to_document_level(run)
    assert value(evaluate(qrels, documents, ["R@2"]), "R@2") == pytest.approx(1.0)


def test_seed_001_precision_at_5_counts_labels_of_at_least_2():
    """Seed 001 4.2: [refund (3), amenities (0), faq (2), ...] -> 2 of 5 -> 0.4."""
    qrels = qrels_of(
        ("q1", "refund", 3), ("q1", "amenities", 0), ("q1", "faq", 2), ("q1", "tos", 1)
    )
    run = ranked("q1", ["refund", "amenities", "faq", "tos", "other"])
    per_query = evaluate(qrels, run, ["P(rel=2)@5", "P@5"])
    assert value(per_query, "P(rel=2)@5") == pytest.approx(0.4)
    assert value(per_query, "P@5") == pytest.approx(0.6)  # label 1 counts at the default level


def test_precision_divides_by_k_even_when_fewer_were_retrieved():
    qrels = qrels_of(("q1", "a", 1), ("q1", "b", 1))
    per_query = evaluate(qrels, ranked("q1", ["a", "x", "b"]), ["P@10", "Judged@10"])
    assert value(per_query, "P@10") == pytest.approx(2 / 10)
    assert value(per_query, "Judged@10") == pytest.approx(2 / 10)


# Semantics ----------------------------------------------------------------------------------


def test_judged_query_with_no_results_counts_zero_where_pytrec_eval_drops_it():
    qrels = qrels_of(("q1", "a", 1), ("q2", "b", 2), ("q3", "c", 1))
    run = pd.concat(
        [
            ranked("q1", ["a"]),
            pd.DataFrame({"query_id": ["q2"], "doc_id": [None], "score": [None]}),  # placeholder
        ]
    )  # q3 is not in the run at all
    measures = ["P@5", "R@10", "nDCG@10", "RR", "AP", "Rprec", "Success@5", "F1@5", "ER@5"]
    per_query = evaluate(qrels, run, measures)
    for query in ("q2", "q3"):
        for measure in measures:
            assert value(per_query, measure, query) == 0.0
    mean_rr = per_query.loc[per_query["measure"] == "RR", "value"].mean()
    assert mean_rr == pytest.approx(1 / 3)
    trec = pytrec_eval.RelevanceEvaluator(
        {"q1": {"a": 1}, "q2": {"b": 2}, "q3": {"c": 1}}, {"recip_rank"}
    ).evaluate({"q1": {"a": 1.0}})
    assert set(trec) == {"q1"}  # the inflated mean of 1.0 we do not report


def test_queries_without_relevant_judgments_are_excluded_and_listed():
    qrels = qrels_of(("q1", "a", 1), ("q2", "b", 0))
    run = pd.concat([ranked("q1", ["a"]), ranked("q2", ["b"]), ranked("q4", ["z"])])
    per_query = evaluate(qrels, run, ["P@1", "Diversity@1"])
    assert set(per_query.loc[per_query["measure"] == "P@1", "query_id"]) == {"q1"}
    # Diversity needs no judgments, so every query of the run has it.
    assert set(per_query.loc[per_query["measure"] == "Diversity@1", "query_id"]) == {
        "q1",
        "q2",
        "q4",
    }
    assert unjudged_queries(qrels, run) == ["q2", "q4"]


def test_labels_below_the_threshold_are_not_relevant():
    qrels = qrels_of(("q1", "a", 1), ("q1", "b", 2))
    per_query = evaluate(qrels, ranked("q1", ["a", "b"]), ["RR(rel=2)", "R(rel=2)@1", "AP(rel=2)"])
    assert value(per_query, "RR(rel=2)") == pytest.approx(0.5)
    assert value(per_query, "R(rel=2)@1") == 0.0
    assert value(per_query, "AP(rel=2)") == pytest.approx(0.5)


def test_ties_are_broken_by_doc_id_descending_and_rank_columns_are_ignored():
    qrels = qrels_of(("q1", "a", 1))
    # All tied: trec_eval order is c, b, a, so the relevant doc is third.
    run = run_of(("q1", "a", 1.0), ("q1", "b", 1.0), ("q1", "c", 1.0)).assign(rank=[1, 2, 3])
    assert value(evaluate(qrels, run, ["RR"]), "RR") == pytest.approx(1 / 3)


@pytest.mark.parametrize("n_docs", [30, 2000])  # 6,000 shuffled rows take the hashed path
def test_rows_in_any_order_give_the_same_values_as_order_run(n_docs):
    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(n_docs)]
    run = pd.DataFrame(
        {
            "query_id": np.repeat(["q1", "q2", "q3"], n_docs),
            "doc_id": docs * 3,
            "score": rng.integers(0, 5, 3 * n_docs).astype(float),
        }
    )
    judged = docs[::3]
    qrels = pd.DataFrame(
        {
            "query_id": np.repeat(["q1", "q2", "q3"], len(judged)),
            "doc_id": judged * 3,
            "relevance": rng.integers(0, 4, 3 * len(judged)),
        }
    )
    measures = ["nDCG@10", "AP", "RR", "P@5", "Rprec"]
    reference = evaluate(qrels, order_run(run), measures)
    shuffled = run.sample(frac=1.0, random_state=3)
    pd.testing.assert_frame_equal(evaluate(qrels, shuffled, measures), reference)
    pd.testing.assert_frame_equal(evaluate(qrels, shuffled, measures), reference)  # deterministic


def test_a_doc_retrieved_twice_for_one_query_is_an_input_error():
    qrels = qrels_of(("q1", "a", 1))
    run = run_of(("q1", "a", 2.0), ("q1", "b", 1.5), ("q1", "a", 1.0))
    with pytest.raises(InputError) as raised:
        evaluate(qrels, run, ["P@5"])
    assert "'q1'" in str(raised.value) and "'a'" in str(raised.value)
    assert raised.value.field == "doc_id"
    # The same doc for two different queries is fine.
    evaluate(qrels, run_of(("q1", "a", 1.0), ("q2", "a", 1.0)), ["P@5"])


def test_judgments_made_ahead_change_nothing_and_a_repeated_judgment_is_named():
    qrels = qrels_of(("q1", "a", 2), ("q1", "c", 1), ("q2", "b", 1))
    run = run_of(("q1", "a", 1.0), ("q1", "b", 2.0), ("q1", "c", 0.5), ("q2", "b", 1.0))
    measures = ["nDCG@10", "AP", "nDCG(judged)@10"]  # (condensed: a second run, same qrels)
    ahead = evaluate(qrels, run, measures, Judgments.of(qrels))
    pd.testing.assert_frame_equal(ahead, evaluate(qrels, run, measures))
    twice = qrels_of(("q1", "a", 2), ("q2", "b", 1), ("q1", "a", 1))
    with pytest.raises(InputError, match="qrels judge doc 'a' for query 'q1' more than once"):
        Judgments.of(twice)
    with pytest.raises(InputError, match="qrels judge doc 'a' for query 'q1' more than once"):
        evaluate(twice, run, measures)


def test_a_qrels_readers_keys_are_the_judgments_keys(tmp_path):
    path = tmp_path / "qrels"
    path.write_text("q1 0 a 2\nq1 0 c 1\nq2 0 b 1\nq0 0 a 0\n")
    qrels, keys = read_keyed_qrels(path)
    assert keys is not None
    made = Judgments.of(qrels)
    assert list(Judgments.of(qrels, keys).keys) == list(made.keys)
    run = run_of(("q1", "a", 1.0), ("q1", "b", 2.0), ("q1", "c", 0.5), ("q2", "b", 1.0))
    pd.testing.assert_frame_equal(
        evaluate(qrels, run, ["AP"], Judgments.of(qrels, keys)), evaluate(qrels, run, ["AP"])
    )


def test_hash_collisions_fall_back_to_exact_ids(monkeypatch):
    """Every id fingerprinting to the same value must change nothing but the speed."""
    qrels = qrels_of(("q1", "a", 2), ("q1", "c", 1), ("q2", "b", 1))
    run = run_of(("q1", "a", 1.0), ("q1", "b", 2.0), ("q1", "c", 0.5), ("q2", "b", 1.0))
    measures = ["nDCG@10", "AP", "RR", "P@2"]
    expected = evaluate(qrels, run, measures)
    monkeypatch.setattr(
        "rageval_pipeline.core.measures.join.pair_keys",
        lambda query, doc, query_index=None: np.zeros(len(doc), dtype=np.uint64),
    )
    pd.testing.assert_frame_equal(evaluate(qrels, run, measures), expected)
    with pytest.raises(InputError, match="more than once"):
        evaluate(qrels, run_of(("q1", "a", 1.0), ("q1", "a", 0.5)), measures)


def test_fingerprints_do_not_depend_on_the_other_ids_of_the_batch():
    short = keys.fingerprint(pa.array(["abc", "doc-12345678"], pa.large_string()))
    mixed = keys.fingerprint(pa.array(["x" * 300, "abc", "doc-12345678"], pa.large_string()))
    assert list(short) == list(mixed[1:])
    assert short[0] != short[1]
    ids = pa.array([f"id-{i}" for i in range(50)] + ["é" * 700], pa.large_string())
    salt = np.arange(51) % 7
    assert len(set(keys.fingerprint(ids, salt))) == 51


def test_a_per_block_salt_fingerprints_like_the_same_salt_on_every_row(monkeypatch):
    sizes = [30, 10, 70, 20, 90, 40]
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    ids = pa.array([f"doc-{i % 5}" for i in range(sum(sizes))], pa.large_string())
    salt = np.arange(1, len(sizes) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    every_row = keys.fingerprint(ids, np.repeat(salt, sizes))
    assert list(keys.fingerprint(ids, salt, salt_starts=starts)) == list(every_row)
    # Slices cut blocks anywhere: still the same values.
    monkeypatch.setattr(keys, "_PAD_ROWS", 4)
    assert list(keys.fingerprint(ids, salt, salt_starts=starts)) == list(every_row)
    query = pa.array(np.repeat([f"q{i}" for i in range(len(sizes))], sizes), pa.large_string())
    assert list(keys.pair_keys(query, ids)) == list(keys.fingerprint(ids, keys.fingerprint(query)))


def test_repeated_keys_are_found_wherever_they_are():
    table = np.array([7, 8, 9, 1, 2, 3, 4, 5, 6, 10, 11], dtype=np.uint64)
    assert keys.shared_keys(table).size == 0
    for first, again in [(0, 2), (5, 8), (9, 10), (0, 10)]:
        repeated = table.copy()
        repeated[again] = repeated[first]
        assert list(keys.shared_keys(repeated)) == [first, again]


def test_diversity_and_clustering_use_source_ids_only():
    run = ranked("q1", ["A:0", "A:1", "B:0", "A:2", "C:0"], ["A", "A", "B", "A", "C"])
    per_query = evaluate(qrels_of(("q9", "x", 1)), run, ["Diversity@4", "Clustering@4"])
    assert value(per_query, "Diversity@4") == pytest.approx(2 / 4)  # A, B
    assert value(per_query, "Clustering@4") == pytest.approx(3 / 4)  # A holds 3 of 4
    short = evaluate(
        qrels_of(("q9", "x", 1)),
        ranked("q1", ["A:0", "A:1"], ["A", "A"]),
        ["Diversity@4", "Clustering@4"],
    )
    assert value(short, "Diversity@4") == pytest.approx(1 / 4)
    assert value(short, "Clustering@4") == pytest.approx(1.0)  # share of what was retrieved


def test_to_document_level_ranks_documents_by_their_best_chunk():
    run = pd.DataFrame(
        {
            "query_id": ["q1"] * 5 + ["q2"],
            "doc_id": ["B:0", "A:0", "A:1", "C:0", "B:1", None],
            "source_id": ["B", "A", "A", "C", "B", None],
            "score": [0.9, 0.9, 0.5, 0.7, 0.1, None],
            "latency_ms": [5.0] * 5 + [3.0],
        }
    )
    documents = to_document_level(run)
    q1 = documents[documents["query_id"] == "q1"]
    # Tied best chunks B:0 and A:0: trec_eval order puts "B:0" first (doc id descending).
    assert list(q1["doc_id"]) == ["B", "A", "C"]
    assert list(q1["rank"]) == [1, 2, 3]
    assert list(order_run(q1)["doc_id"]) == ["B", "A", "C"]  # the new scores keep the order
    assert documents.loc[documents["query_id"] == "q2", "doc_id"].isna().all()
    assert set(documents["latency_ms"]) == {5.0, 3.0}


def test_ap_r_precision_success_and_f1_by_hand():
    qrels = qrels_of(("q1", "a", 1), ("q1", "b", 1), ("q1", "c", 1), ("q1", "z", 1))
    run = ranked("q1", ["a", "x", "b", "y", "c"])
    per_query = evaluate(qrels, run, ["AP", "AP@3", "Rprec", "Success@2", "Success@1", "F1@5"])
    assert value(per_query, "AP") == pytest.approx((1 + 2 / 3 + 3 / 5) / 4)
    assert value(per_query, "AP@3") == pytest.approx((1 + 2 / 3) / 4)
    assert value(per_query, "Rprec") == pytest.approx(2 / 4)
    assert value(per_query, "Success@1") == 1.0
    p, r = 3 / 5, 3 / 4
    assert value(per_query, "F1@5") == pytest.approx(2 * p * r / (p + r))
