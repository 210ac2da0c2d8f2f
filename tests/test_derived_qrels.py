"""Evidence spans judge any chunking (issue 25): the derived chunk grades, and the reference
chunking reproducing the suite's own chunk judgments."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.io import tables
from rageval_pipeline.core.measures.defaults import budget_measures
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus, content_hash
from rageval_pipeline.core.suites.derived import EvidenceSet, Tokens, derive_qrels
from rageval_pipeline.core.suites.loaders import load_dataset


def reference_spans(
    qrels: pd.DataFrame, reference_chunks: pd.DataFrame, corpus: pd.DataFrame
) -> pd.DataFrame:
    """Chunk-level judgments as SPANS: each judged chunk's extent under the reference chunking
    (`reference_chunks`), hashed from the document text. Document-level judgments and ones
    naming an absent chunk are left out."""
    judged = qrels[qrels["level"] == "chunk"]
    extents = reference_chunks[["chunk_id", "doc_id", "start", "end"]].rename(
        columns={"chunk_id": "target", "doc_id": "document"}
    )
    spans = judged.merge(extents, left_on="doc_id", right_on="target")
    spans = spans.drop(columns="doc_id").rename(columns={"document": "doc_id"})
    texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    excerpts = [
        texts[d][a:b] for d, a, b in zip(spans["doc_id"], spans["start"], spans["end"], strict=True)
    ]
    return pd.DataFrame(
        {
            "split": spans["split"].astype(str),
            "query_id": spans["query_id"].astype(str),
            "doc_id": spans["doc_id"].astype(str),
            "start": spans["start"].astype("int64"),
            "end": spans["end"].astype("int64"),
            "relevance": spans["relevance"].astype("int32"),
            "sha256": [content_hash(e) for e in excerpts],
            "decisive_start": spans["start"].astype("int64"),
            "decisive_end": spans["end"].astype("int64"),
        }
    )


TECHDOCS = Path(__file__).resolve().parents[1] / "data" / "suites" / "techdocs"

# Three documents of numbered two-character tokens: token i of a document is chars 3i..3i+2.
DOCS = {
    "a": " ".join(f"a{i}" for i in range(10)),
    "b": " ".join(f"b{i}" for i in range(6)),
    "c": " ".join(f"c{i:x}" for i in range(12)),
}
WINDOWS = ChunkingConfig(strategy="fixed", size=4, overlap=2)  # tokens 0-3, 2-5, 4-7, ...


def corpus() -> pd.DataFrame:
    return pd.DataFrame(
        [dict(doc_id=d, title="", text=t, url="", metadata="{}") for d, t in DOCS.items()]
    )


def span(query: str, doc: str, first: int, last: int, grade: int) -> dict:
    """The span of tokens first..last (inclusive) of `doc`."""
    start, end = 3 * first, 3 * last + 2
    return dict(
        split="test",
        query_id=query,
        doc_id=doc,
        start=start,
        end=end,
        relevance=grade,
        sha256=content_hash(DOCS[doc][start:end]),
        decisive_start=start,
        decisive_end=end,
    )


SPANS = tables.conform(
    pd.DataFrame(
        [
            span("q1", "a", 1, 3, 3),  # a short answer
            span("q1", "a", 3, 5, 1),  # context beside it
            span("q1", "a", 7, 9, 1),  # more context at the end
            span("q1", "c", 1, 10, 2),  # a long relevant section
            span("q2", "a", 0, 0, 2),  # one token
            span("q2", "b", 4, 5, 0),  # judged not relevant
        ]
    ),
    tables.SPANS,
).to_pandas()


def units(chunks: pd.DataFrame) -> pd.DataFrame:
    return chunks[["chunk_id", "doc_id", "start", "end"]].rename(columns={"chunk_id": "id"})


def test_fixed_windows_with_overlap_get_the_hand_computed_grades():
    chunks = chunk_corpus(corpus(), WINDOWS, "t")
    derived = derive_qrels(SPANS, units(chunks), Tokens.of(corpus()))
    got = {(q, d): g for q, d, g in derived[["query_id", "doc_id", "relevance"]].values}
    assert got == {
        # a:0 (tokens 0-3) holds all of the answer (3/3) and 1/3 of the context: 3.
        ("q1", "a:chunk:0"): 3,
        # a:1 (2-5) holds 2/3 of the answer and all of the context: max(3, 1).
        ("q1", "a:chunk:1"): 3,
        # a:2 (4-7) holds 2/3 of the context a3-a5 (1) and 1/3 of a7-a9 (0): 1.
        ("q1", "a:chunk:2"): 1,
        ("q1", "a:chunk:3"): 1,  # a:3 (6-9) holds all of a7-a9
        # Every window of c holds at most 4 of the nugget's 10 decisive tokens: a fragment of
        # it, judged 0 however much of the window it fills. b is not judged for q1 at all.
        ("q1", "c:chunk:0"): 0,
        ("q1", "c:chunk:1"): 0,
        ("q1", "c:chunk:2"): 0,
        ("q1", "c:chunk:3"): 0,
        ("q1", "c:chunk:4"): 0,
        ("q2", "a:chunk:0"): 2,  # a:1 does not reach token 0
        ("q2", "b:chunk:1"): 0,  # judged, not relevant; b:0 does not reach tokens 4-5
    }
    assert derived["level"].eq("chunk").all()
    assert list(derived.columns) == tables.QRELS.names


def test_a_chunk_sharing_a_minority_of_a_span_and_being_a_minority_of_it_is_judged_zero():
    chunks = pd.DataFrame(
        [dict(id="x", doc_id="a", start=0, end=8)]  # tokens a0-a2
    )
    # Tokens a2-a9, decisive in whole: x shares 1 of 8, 1 of x's 3.
    wide = SPANS.iloc[[0]].assign(start=6, end=29, decisive_start=6, decisive_end=29)
    derived = derive_qrels(wide, chunks, Tokens.of(corpus()))
    assert derived[["doc_id", "relevance"]].values.tolist() == [["x", 0]]


def test_a_cut_token_is_held_by_both_sides_of_the_cut():
    tokens = Tokens.of(corpus())
    # "a0 a1 a2 ..." cut at 4, inside "a1" (chars 3-5): both sides hold it; a document
    # the corpus lacks holds nothing.
    cut = pd.DataFrame(
        [
            dict(doc_id="a", start=0, end=4),
            dict(doc_id="a", start=4, end=8),
            dict(doc_id="zz", start=0, end=8),
        ]
    )
    first, stop = tokens.ranges(cut)
    assert list(zip(first.tolist(), stop.tolist(), strict=True)) == [(0, 2), (1, 3), (0, 0)]


def techdocs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, ChunkingConfig]:
    data = load_dataset(TECHDOCS)
    qrels = data.qrels[data.qrels["split"] == "test"].reset_index(drop=True)
    return data.corpus, data.queries, qrels, data.reference_chunking


def test_reference_chunking_derives_exactly_the_suites_chunk_judgments():
    docs, _, qrels, reference = techdocs()
    chunks = chunk_corpus(docs, reference, "t")
    spans = reference_spans(qrels, chunks, docs)
    assert len(spans) == (qrels["level"] == "chunk").sum()
    texts = dict(zip(docs["doc_id"], docs["text"], strict=True))
    assert all(
        content_hash(texts[d][a:b]) == h
        for d, a, b, h in spans[["doc_id", "start", "end", "sha256"]].values
    )
    derived = derive_qrels(spans, units(chunks), Tokens.of(docs))
    key = ["query_id", "doc_id"]
    expected = qrels[qrels["level"] == "chunk"].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(
        derived.sort_values(key).reset_index(drop=True)[[*key, "relevance"]],
        expected[[*key, "relevance"]].astype({"relevance": "int32"}),
    )


def bm25_run(chunks: pd.DataFrame, queries: pd.DataFrame) -> pd.DataFrame:
    from rageval_pipeline.core.retrieval.base import execute
    from rageval_pipeline.core.retrieval.bm25 import BM25Index

    return execute(BM25Index.build(chunks).search, queries, 100)


def test_reference_chunking_scores_are_unchanged_by_evidence_and_gain_span_measures():
    docs, queries, qrels, reference = techdocs()
    chunks = chunk_corpus(docs, reference, "t")
    run = bm25_run(chunks, queries)
    before = measure_run(run, qrels, queries, chunk_level=True)
    evidence = EvidenceSet.of(reference_spans(qrels, chunks, docs), docs, chunks)
    after = measure_run(run, qrels, queries, chunk_level=True, evidence=evidence)
    assert before.level == after.level == "chunk"
    span_measures = ["EvidenceRecall@10", "TokenPrecision@10", "TokenIoU@10", "Tokens@10"]
    span_measures += budget_measures()
    spanned = after.per_query["measure"].isin(span_measures)
    pd.testing.assert_frame_equal(before.per_query, after.per_query[~spanned])
    n_judged = qrels.loc[qrels["relevance"] > 0, "query_id"].nunique()
    assert spanned.sum() == len(span_measures) * n_judged
    pd.testing.assert_frame_equal(before.top, after.top)


def dense_run(chunks: pd.DataFrame, queries: pd.DataFrame, cache: Path) -> pd.DataFrame:
    from rageval_pipeline.core.retrieval.base import execute
    from rageval_pipeline.core.retrieval.dense import DenseIndex

    return execute(DenseIndex.build(chunks, cache).search, queries, 100)


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
@pytest.mark.parametrize(
    "chunking",
    [ChunkingConfig(strategy="fixed", size=128, overlap=32), ChunkingConfig(strategy="sentence")],
    ids=["fixed", "sentence"],
)
def test_another_chunking_is_judged_at_chunk_level_by_derived_qrels(chunking, retriever, tmp_path):
    docs, queries, qrels, reference = techdocs()
    spans = reference_spans(qrels, chunk_corpus(docs, reference, "t"), docs)
    chunks = chunk_corpus(docs, chunking, "t")
    run = bm25_run(chunks, queries) if retriever == "bm25" else dense_run(chunks, queries, tmp_path)
    plain = measure_run(run, qrels, queries, chunk_level=False)
    assert plain.level == "document"  # without spans: today's fallback
    results = measure_run(
        run, qrels, queries, chunk_level=False, evidence=EvidenceSet.of(spans, docs, chunks)
    )
    assert results.level == "chunk"
    assert set(results.top["doc_id"]) <= set(chunks["chunk_id"])
    means = dict(zip(results.means["measure"], results.means["value"], strict=True))
    # Every chunk overlapping a judged span is judged, and techdocs judges densely.
    assert means["Judged@10"] >= 0.95
    assert 0 < means["EvidenceRecall@10"] <= 1 and 0 < means["TokenIoU@10"] < 1
