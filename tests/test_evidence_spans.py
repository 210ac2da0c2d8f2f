"""Evidence inside judged targets (issue 33): a judged region (grade 0) with the evidence spans
inside it, the derived rule for small chunks, and what the measures count as evidence."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.io import tables
from rageval_pipeline.core.measures.spans import evaluate_spans
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.suites.derived import EvidenceSet, Tokens, derive_qrels
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import suite_spans, suite_tables

ROOT = Path(__file__).resolve().parents[1]
TECHDOCS = ROOT / "data" / "suites" / "techdocs"

# One document of 60 numbered three-character tokens: token i is characters 4i..4i+3.
TOKENS = 60
TEXT = " ".join(f"t{i:02d}" for i in range(TOKENS))
MEASURES = ("Judged@1", "P@1", "EvidenceRecall@1")
SPAN_MEASURES = ("EvidenceRecall@1", "TokenPrecision@1")
BUDGETS = ("EvidenceRecall@512t", "TokenPrecision@512t")


def chars(first: int, stop: int) -> tuple[int, int]:
    """The characters of tokens [first, stop)."""
    return 4 * first, 4 * stop - 1


def grades(spans: list[tuple[int, int, int]], chunks: list[tuple[int, int]]) -> dict[int, int]:
    """Chunk number -> derived grade, for token-range spans (first, stop, grade) and chunks."""
    table = pd.DataFrame(
        [
            dict(split="test", query_id="q", doc_id="d", start=a, end=b, relevance=g)
            for first, stop, g in spans
            for a, b in [chars(first, stop)]
        ]
    )
    units = pd.DataFrame(
        [
            dict(id=str(n), doc_id="d", start=a, end=b)
            for n, c in enumerate(chunks)
            for a, b in [chars(*c)]
        ]
    )
    derived = derive_qrels(table, units, Tokens.of(pd.DataFrame({"doc_id": ["d"], "text": [TEXT]})))
    return {int(c): int(g) for c, g in zip(derived["doc_id"], derived["relevance"], strict=True)}


@st.composite
def judged_targets(draw) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """Judged regions (grade 0) cutting the document, each with evidence spans of one grade
    inside it, and a chunking: contiguous chunks, or windows that overlap."""
    cuts = sorted(set(draw(st.lists(st.integers(1, TOKENS - 1), max_size=4))))
    bounds = list(zip([0, *cuts], [*cuts, TOKENS], strict=True))
    spans = []
    for first, stop in bounds:
        spans.append((first, stop, 0))
        grade = draw(st.integers(0, 3))
        for _ in range(draw(st.integers(0, 2)) if grade else 0):
            a = draw(st.integers(first, stop - 1))
            b = draw(st.integers(a + 1, min(stop, a + 12)))
            spans.append((a, b, grade))
    size = draw(st.integers(1, 20))
    overlap = draw(st.integers(0, size - 1))
    step = size - overlap
    chunks = [(a, min(a + size, TOKENS)) for a in range(0, TOKENS - overlap, step)]
    return spans, chunks


@settings(max_examples=80, deadline=None)
@given(judged_targets())
def test_a_chunk_holding_the_answer_earns_at_least_a_chunk_beside_it(drawn):
    """The invariant of the derived rule for small chunks: a chunk that holds an evidence span
    whole earns at least its grade, and a chunk that holds no evidence, only judged text beside
    it, earns 0 and is judged; so the first never ranks below the second."""
    spans, chunks = drawn
    derived = grades(spans, chunks)
    evidence = [(a, b, g) for a, b, g in spans if g >= 1]
    holders = {}
    for n, (c, d) in enumerate(chunks):
        held = [g for a, b, g in evidence if c <= a and b <= d]
        if held:
            holders[n] = max(held)
            assert derived[n] >= holders[n], (n, chunks[n], spans)
    beside = [
        n for n, (c, d) in enumerate(chunks) if not any(a < d and c < b for a, b, _ in evidence)
    ]
    for n in beside:
        assert derived[n] == 0, (n, chunks[n], spans)  # every chunk lies in a judged region
    assert all(derived[h] >= derived[n] for h in holders for n in beside)


def test_evidence_measures_count_only_graded_spans_and_the_region_judges_chunks():
    """A section judged as a region (grade 0) with a 5-token answer (grade 3) inside: a chunk
    retrieving the whole section holds all the evidence at a precision of 5 tokens in 20; a
    chunk of the region without the answer is judged (Judged@1 = 1) but not relevant."""
    corpus = pd.DataFrame([dict(doc_id="d", title="", text=TEXT, url="", metadata="{}")])
    region, answer = chars(0, 20), chars(8, 13)
    spans = pd.DataFrame(
        [
            dict(split="test", query_id="q", doc_id="d", start=a, end=b, relevance=g, sha256="")
            for (a, b), g in ((region, 0), (answer, 3))
        ]
    )
    chunks = pd.DataFrame(
        [
            dict(chunk_id=cid, doc_id="d", start=a, end=b)
            for cid, (a, b) in (("section", region), ("beside", chars(0, 8)))
        ]
    )
    queries = pd.DataFrame([dict(query_id="q", text="x")])
    evidence = EvidenceSet.of(spans, corpus, chunks)
    extents = chunks.rename(columns={"chunk_id": "id"})
    for retrieved, recall, precision, judged, relevant in (
        ("section", 1.0, 0.25, 1.0, 1.0),
        ("beside", 0.0, 0.0, 1.0, 0.0),
    ):
        run = pd.DataFrame([dict(query_id="q", doc_id=retrieved, score=1.0, rank=1)])
        values = evaluate_spans(run, spans, extents, evidence.tokens, [*SPAN_MEASURES, *BUDGETS])
        assert values["value"].tolist() == [recall, precision] * 2
        qrels = tables.empty(tables.QRELS)
        results = measure_run(
            run, qrels, queries, chunk_level=False, measures=MEASURES, evidence=evidence
        )
        means = dict(zip(results.means["measure"], results.means["value"], strict=True))
        assert (means["Judged@1"], means["P@1"]) == (judged, relevant)


def _sentences(size: int) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """techdocs' corpus, its sentence chunks of `size` words, and each chunk's text."""
    corpus = suite_tables(load_suite(TECHDOCS)).corpus
    chunks = chunk_corpus(corpus, ChunkingConfig(strategy="sentence", size=size, overlap=0), "")
    texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    text_of = {c.chunk_id: texts[c.doc_id][c.start : c.end] for c in chunks.itertuples()}
    return corpus, chunks, text_of


def _derived(spans: pd.DataFrame, corpus: pd.DataFrame, chunks: pd.DataFrame) -> dict:
    """(query, chunk) -> derived grade."""
    units = chunks[["chunk_id", "doc_id", "start", "end"]].rename(columns={"chunk_id": "id"})
    derived = derive_qrels(spans, units, Tokens.of(corpus))
    return {(q, c): g for q, c, g in derived[["query_id", "doc_id", "relevance"]].values}


def _chunk(text_of: dict[str, str], starts: str) -> str:
    [chunk] = [c for c, t in text_of.items() if t.startswith(starts)]
    return chunk


def test_techdocs_sentence_chunks_are_graded_by_their_evidence():
    """Q012 ("What does the service verify before it is allowed to receive traffic?") with
    32-word sentence chunks: the `/healthz` look-alike sentence inside the relevant section
    earned 3 from the section span of round 1; the evidence spans give it 0 and the answering
    `/readyz` sentence 3. Q002 with 128-word chunks: the chunk holding the answer (round 1's
    sections gave it 1 beside a neighbour of 3) earns 3. At 32 and 128 words, every chunk
    holding an evidence span whole earns at least its grade, and a chunk holding no evidence
    of a query earns 0 for it."""
    suite = load_suite(TECHDOCS)
    spans = suite_spans(suite)
    corpus, chunks, text_of = _sentences(32)
    healthz = _chunk(text_of, "`/healthz` is the liveness check")
    readyz = _chunk(text_of, "`/readyz` is the readiness check")
    got = _derived(spans, corpus, chunks)
    assert (got["Q012", healthz], got["Q012", readyz]) == (0, 3)
    evidence = spans[spans["relevance"] >= 1]
    for size in (32, 128):
        if size != 32:
            corpus, chunks, _ = _sentences(size)
            got = _derived(spans, corpus, chunks)
            # Q002 (rate limits): the first 128 words of rate-limiting hold the answer, which
            # round 1's sections graded 1 beside a neighbour of 3; its evidence gives it 3.
            assert got["Q002", "rate-limiting:chunk:0"] == 3
        pairs = evidence.merge(chunks, on="doc_id", suffixes=("", "_chunk"))
        held = pairs[
            (pairs["start_chunk"] <= pairs["start"]) & (pairs["end"] <= pairs["end_chunk"])
        ]
        assert len(held) >= 200, len(held)  # most evidence sits whole in a sentence chunk
        for e in held.itertuples():
            assert got[e.query_id, e.chunk_id] >= e.relevance, (size, e.query_id, e.chunk_id)
        near = pairs[(pairs["start"] < pairs["end_chunk"]) & (pairs["start_chunk"] < pairs["end"])]
        touched = set(zip(near["query_id"], near["chunk_id"], strict=True))
        assert all(key in touched for key, g in got.items() if g >= 1), size
