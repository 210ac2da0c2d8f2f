"""Dataset conventions: BEIR's identical-id rule per dataset, and qrels naming unknown items."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from rageval_pipeline.core.io import beir
from rageval_pipeline.core.io.chunk_ids import source_ids
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.suites.conventions import (
    conventions_note,
    drop_identical_ids,
    qrels_coverage,
)
from rageval_pipeline.core.suites.loaders import Dataset, load_dataset

# An ArguAna-like fixture: every query is also a corpus document (same id), and a retriever
# finds each query's own text first.
QRELS = pd.DataFrame(
    {
        "split": "test",
        "query_id": ["a1", "a1", "a2", "a3"],
        "doc_id": ["d1", "d2", "d3", "d4"],
        "relevance": [1, 1, 1, 1],
        "level": "document",
    }
)
QUERIES = pd.DataFrame({"query_id": ["a1", "a2", "a3"], "text": ["...", "...", "..."]})
RUN = pd.DataFrame(
    [
        ("a1", "a1", 9.0),  # the query itself, at rank 1
        ("a1", "d2", 8.0),
        ("a1", "d9", 7.0),
        ("a1", "d1", 6.0),
        ("a2", "a2", 5.0),  # itself again
        ("a2", "d3", 4.0),
        ("a3", "d8", 3.0),  # a3 does not retrieve itself
        ("a3", "a1", 2.5),  # another query's document is a normal document
        ("a3", "d4", 2.0),
    ],
    columns=["query_id", "doc_id", "score"],
).assign(source_id=lambda df: df["doc_id"], latency_ms=1.0)
MEASURES = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "P@5": "P_5", "AP@10": "map_cut_10"}


def beir_evaluate(qrels: pd.DataFrame, run: pd.DataFrame) -> dict[str, float]:
    """BEIR's EvaluateRetrieval.evaluate (beir/retrieval/evaluation.py), reimplemented: with
    ignore_identical_ids it pops every result whose id is the query id, then runs pytrec_eval
    and averages each measure over the evaluated queries."""
    results = {
        q: dict(zip(g["doc_id"], g["score"], strict=True)) for q, g in run.groupby("query_id")
    }
    for query_id, docs in results.items():
        for doc_id in list(docs):
            if doc_id == query_id:
                docs.pop(doc_id)
    judged = {
        q: dict(zip(g["doc_id"], g["relevance"], strict=True)) for q, g in qrels.groupby("query_id")
    }
    scores = pytrec_eval.RelevanceEvaluator(judged, set(MEASURES.values())).evaluate(results)
    return {
        ours: sum(s[theirs] for s in scores.values()) / len(scores)
        for ours, theirs in MEASURES.items()
    }


def means(dataset: str) -> dict[str, float]:
    results = measure_run(
        RUN,
        QRELS,
        QUERIES,
        chunk_level=False,
        measures=tuple(MEASURES),
        ignore_identical_ids=beir.ignores_identical_ids(dataset),
    )
    return dict(zip(results.means["measure"], results.means["value"], strict=True))


def test_the_registry_records_which_datasets_contain_their_queries():
    assert {n for n, d in beir.BEIR_DATASETS.items() if d.ignore_identical_ids} == {
        "arguana",
        "quora",
    }
    assert beir.BEIR_DATASETS["quora"].splits == ("dev", "test")
    assert beir.BEIR_MD5["arguana"] == beir.BEIR_DATASETS["arguana"].md5


@pytest.mark.parametrize("dataset", ["arguana", "quora"])
def test_identical_ids_are_dropped_for_those_datasets_as_beir_does(dataset):
    ours = means(dataset)
    assert ours == pytest.approx(beir_evaluate(QRELS, RUN), abs=1e-9)
    # a1's own document no longer takes rank 1: its relevant d2 moves up to rank 1.
    assert ours["P@5"] == pytest.approx((2 / 5 + 1 / 5 + 1 / 5) / 3)


def test_other_datasets_keep_a_document_whose_id_is_the_query_id():
    kept = means("nfcorpus")
    assert kept["nDCG@10"] < means("arguana")["nDCG@10"]
    trec = {q: dict(zip(g["doc_id"], g["score"], strict=True)) for q, g in RUN.groupby("query_id")}
    judged = {
        q: dict(zip(g["doc_id"], g["relevance"], strict=True)) for q, g in QRELS.groupby("query_id")
    }
    plain = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10"}).evaluate(trec)
    assert kept["nDCG@10"] == pytest.approx(sum(s["ndcg_cut_10"] for s in plain.values()) / 3)


def test_drop_identical_ids_counts_what_it_dropped():
    run, dropped = drop_identical_ids(RUN)
    assert dropped == 2
    assert ("a3", "a1") in set(zip(run["query_id"], run["doc_id"], strict=True))


def test_qrels_naming_unknown_documents_and_queries_are_counted_and_kept():
    qrels = pd.concat(
        [
            QRELS,
            pd.DataFrame(
                [
                    {
                        "split": "test",
                        "query_id": "a9",
                        "doc_id": "gone",
                        "relevance": 1,
                        "level": "document",
                    }
                ]
            ),
        ],
        ignore_index=True,
    )
    corpus = pd.DataFrame({"doc_id": ["a1", "a2", "a3", "d1", "d2", "d3"]})  # no d4, no "gone"
    coverage = qrels_coverage(qrels, corpus, QUERIES["query_id"], level="document", reference=None)
    assert (coverage.judgments, coverage.missing_targets, coverage.missing_queries) == (5, 2, 1)
    assert coverage.examples == ["a3/d4", "a9/gone", "a9"]
    assert conventions_note(coverage, 0) == (
        "\n**Qrels coverage (document level):** 2 of 5 judgments name a document absent from "
        "the corpus (a chunk-level judgment by its document) and 1 judged queries are absent "
        "from the queries file; they are kept, as trec_eval keeps them (they cap recall). "
        "Examples: a3/d4, a9/gone, a9.\n"
    )
    # Kept: a3's judged-but-absent d4 still counts in recall's denominator.
    results = measure_run(RUN.iloc[:0], qrels, QUERIES, chunk_level=False, measures=("R@100",))
    assert set(results.per_query["query_id"]) == {"a1", "a2", "a3", "a9"}


@pytest.fixture(scope="module")
def techdocs() -> Dataset:
    return load_dataset(Path(__file__).parents[1] / "data" / "suites" / "techdocs")


def test_techdocs_chunk_judgments_are_found_among_its_reference_chunks(techdocs: Dataset):
    """Seed 000's quality report: chunk ids are looked for among chunks, not documents."""
    corpus, queries, qrels, reference = techdocs
    assert (qrels["level"] == "chunk").all()
    coverage = qrels_coverage(
        qrels, corpus, queries["query_id"], level="chunk", reference=reference
    )
    assert (coverage.missing_targets, coverage.missing_queries) == (0, 0)
    assert conventions_note(coverage, 0).startswith(
        f"\n**Qrels coverage (chunk level):** 0 of {len(qrels)} judgments name a chunk absent "
        "from the corpus under its reference chunking and 0 judged queries are absent"
    )
    # A run judged at document level (another chunking) looks for each chunk's document.
    lifted = qrels_coverage(
        qrels, corpus, queries["query_id"], level="document", reference=reference
    )
    assert lifted.missing_targets == 0


def test_techdocs_judgments_of_chunks_the_corpus_lost_are_counted(techdocs: Dataset):
    """Documents cut to their first section lose the others: judgments of those chunks cap
    recall at chunk level; at document level only a document missing altogether does."""
    corpus, queries, qrels, reference = techdocs
    cut = corpus.assign(text=corpus["text"].str.split("\n## ").str[0])
    kept = set(chunk_corpus(cut, reference, ingested_at="")["chunk_id"])
    lost = qrels[~qrels["doc_id"].isin(kept)]
    assert 0 < len(lost) < len(qrels)
    coverage = qrels_coverage(qrels, cut, queries["query_id"], level="chunk", reference=reference)
    assert coverage.missing_targets == len(lost)
    assert coverage.examples == [f"{q}/{d}" for q, d in lost[["query_id", "doc_id"]].values[:5]]
    assert (
        qrels_coverage(
            qrels, cut, queries["query_id"], level="document", reference=reference
        ).missing_targets
        == 0
    )
    documents = source_ids(qrels["doc_id"])
    without_one = cut[cut["doc_id"] != documents.iloc[0]]
    at_documents = qrels_coverage(
        qrels, without_one, queries["query_id"], level="document", reference=reference
    )
    assert at_documents.missing_targets == int((documents == documents.iloc[0]).sum())
