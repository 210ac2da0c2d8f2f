"""The span measures (issue 25) against a hand computation and a direct token-set computation."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures import evaluate
from rageval_pipeline.core.measures.names import parse_measure
from rageval_pipeline.core.measures.spans import evaluate_spans
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.suites.derived import EvidenceSet, Tokens
from tests.test_derived_qrels import DOCS, SPANS, WINDOWS, corpus

MEASURES = ["EvidenceRecall", "TokenPrecision", "TokenIoU", "Tokens"]


def run(rows: dict[str, list[str]]) -> pd.DataFrame:
    """A RUN ranking each query's ids in the order given."""
    return pd.DataFrame(
        [
            dict(query_id=q, doc_id=d, score=float(len(ids) - i))
            for q, ids in rows.items()
            for i, d in enumerate(ids)
        ],
        columns=["query_id", "doc_id", "score"],
    )


def values(per_query: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {(q, m): v for q, m, v in per_query[["query_id", "measure", "value"]].values}


def test_three_documents_with_overlapping_windows_match_the_hand_computation():
    evidence = EvidenceSet.of(SPANS, corpus(), chunk_corpus(corpus(), WINDOWS, "t"))
    ranked = run(
        {
            "q1": ["a:chunk:0", "a:chunk:1", "b:chunk:0", "c:chunk:2"],
            "q2": ["b:chunk:1", "a:chunk:0"],
            "q3": ["a:chunk:0"],  # no span: not evaluated
        }
    )
    names = [f"{m}@{k}" for m in MEASURES for k in (1, 2, 3, 4)] + ["EvidenceRecall(rel=2)@3"]
    got = values(evaluate_spans(ranked, evidence.spans, evidence.units, evidence.tokens, names))
    # q1's evidence: tokens a1-a5 and a7-a9 (8) and c1-c10 (10): 18. Its top 3 hold a0-a5
    # (a0-a3 and a2-a4 overlap in a2-a3) and b0-b3: 5 evidence tokens of 12 retrieved.
    assert got[("q1", "EvidenceRecall@3")] == pytest.approx(5 / 18)
    assert got[("q1", "TokenPrecision@3")] == pytest.approx(5 / 12)
    assert got[("q1", "TokenIoU@3")] == pytest.approx(5 / (12 + 18 - 5))
    assert got[("q1", "Tokens@3")] == 12
    # The overlap a2-a3 is counted once as evidence but paid twice as context.
    assert got[("q1", "EvidenceRecall@2")] == pytest.approx(5 / 18)
    assert got[("q1", "TokenPrecision@2")] == pytest.approx(5 / 8)
    # c4-c7 adds 4 evidence tokens.
    assert got[("q1", "EvidenceRecall@4")] == pytest.approx(9 / 18)
    assert got[("q1", "TokenIoU@4")] == pytest.approx(9 / 25)
    # rel=2: a1-a3 (grade 3) and c1-c10 (2), 13 tokens; the top 3 hold a1-a3.
    assert got[("q1", "EvidenceRecall(rel=2)@3")] == pytest.approx(3 / 13)
    # q2's evidence is a0 alone (b4-b5 is graded 0).
    assert got[("q2", "EvidenceRecall@1")] == 0 and got[("q2", "Tokens@1")] == 4
    assert got[("q2", "EvidenceRecall@2")] == 1
    assert got[("q2", "TokenPrecision@2")] == pytest.approx(1 / 8)
    assert got[("q2", "TokenIoU@2")] == pytest.approx(1 / 8)
    assert {q for q, _ in got} == {"q1", "q2"}


def token_set(doc: str, start: int, end: int) -> set[tuple[str, int]]:
    """The tokens (document, position) sharing a character with text[start:end]."""
    found = re.finditer(r"\S+", DOCS[doc])
    return {(doc, i) for i, m in enumerate(found) if m.start() < end and m.end() > start}


def direct(spans: pd.DataFrame, extents: list[tuple[str, int, int]], k: int) -> dict[str, float]:
    evidence = set().union(
        *(
            token_set(d, a, b)
            for d, a, b, g in spans[["doc_id", "start", "end", "relevance"]].values
            if g >= 1
        )
    )
    top = [token_set(*extent) for extent in extents[:k]]
    hit = len(evidence & set().union(*top))
    paid = sum(len(t) for t in top)
    return {
        "EvidenceRecall": hit / len(evidence) if evidence else 0.0,
        "TokenPrecision": hit / paid if paid else 0.0,
        "TokenIoU": hit / (paid + len(evidence) - hit) if paid + len(evidence) - hit else 0.0,
        "Tokens": float(paid),
    }


def extent() -> st.SearchStrategy[tuple[str, int, int]]:
    def within(doc: str) -> st.SearchStrategy[tuple[str, int, int]]:
        n = len(DOCS[doc])
        return st.tuples(st.integers(0, n - 1), st.integers(1, n)).map(
            lambda ab: (doc, min(ab), max(ab[1], min(ab) + 1))
        )

    return st.sampled_from(sorted(DOCS)).flatmap(within)


def drawn_tables(spans: list, retrieved: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The SPANS table of drawn (extent, grade) pairs and the units of the drawn extents."""
    table = pd.DataFrame(
        [
            dict(split="test", query_id="q", doc_id=d, start=a, end=b, relevance=g, sha256="")
            for (d, a, b), g in spans
        ]
    )
    units = pd.DataFrame(
        [dict(id=f"u{i}", doc_id=d, start=a, end=b) for i, (d, a, b) in enumerate(retrieved)],
        columns=["id", "doc_id", "start", "end"],
    )
    return table, units


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(st.tuples(extent(), st.integers(0, 3)), min_size=1, max_size=6),
    retrieved=st.lists(extent(), max_size=8),
    k=st.integers(1, 6),
)
def test_span_measures_equal_a_direct_token_set_computation(spans, retrieved, k):
    table, units = drawn_tables(spans, retrieved)
    ranked = run({"q": list(units["id"])})
    got = values(
        evaluate_spans(ranked, table, units, Tokens.of(corpus()), [f"{m}@{k}" for m in MEASURES])
    )
    if not (table["relevance"] >= 1).any():
        assert got == {}
        return
    expected = direct(table, retrieved, k)
    for measure in MEASURES:
        if measure == "Tokens" and not expected["Tokens"]:  # nothing retrieved: no cost value
            assert ("q", f"Tokens@{k}") not in got
            continue
        assert got[("q", f"{measure}@{k}")] == pytest.approx(expected[measure])


def test_span_measures_are_named_like_every_measure_and_refused_without_spans():
    assert str(parse_measure("evidence_recall@10")) == "EvidenceRecall@10"
    assert str(parse_measure("TokenIoU(rel=2)@5")) == "TokenIoU(rel=2)@5"
    assert parse_measure("Tokens@10").higher_is_better is False
    qrels = pd.DataFrame(
        [dict(split="test", query_id="q", doc_id="a", relevance=1, level="document")]
    )
    with pytest.raises(InputError, match="evidence spans"):
        evaluate(qrels, run({"q": ["a"]}), ["TokenIoU@10"])


def test_a_run_of_whole_documents_is_measured_on_whole_documents():
    # An external system's run: document ids of unknown chunking, judged at document level.
    qrels = pd.DataFrame(
        [dict(split="test", query_id="q1", doc_id="a", relevance=3, level="document")]
    )
    queries = pd.DataFrame([dict(query_id="q1", text="x")])
    ranked = run({"q1": ["b", "a"]}).assign(source_id=lambda r: r["doc_id"], latency_ms=1.0)
    evidence = EvidenceSet.of(SPANS, corpus(), None)
    results = measure_run(ranked, qrels, queries, chunk_level=False, evidence=evidence)
    assert results.level == "document"
    got = values(results.per_query)
    # b (6 tokens) then a (10): q1's 18 evidence tokens, of which a holds 8.
    assert got[("q1", "Tokens@10")] == 16
    assert got[("q1", "EvidenceRecall@10")] == pytest.approx(8 / 18)
    assert got[("q1", "TokenPrecision@10")] == pytest.approx(8 / 16)
    # Its rows come from `evaluate` and `evaluate_spans`, one table shape (`per_query_table`).
    dtypes = results.per_query[["query_id", "measure", "value"]].dtypes.astype(str).to_dict()
    assert dtypes == {"query_id": "str", "measure": "str", "value": "float64"}
