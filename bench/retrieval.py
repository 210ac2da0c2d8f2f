"""Retrieval bench on BEIR nfcorpus (test split): MiniLM, BM25 and RRF(BM25, MiniLM) nDCG@10.

Checks our dense retriever and fusion against published figures (MiniLM 0.3159 on MTEB) and
measures embedding throughput on this machine. Embeddings go to the pipeline's cache, so a
second run embeds nothing and takes seconds.

    .venv/bin/python bench/retrieval.py [--zip PATH] [--storage DIR] [--batch-size N]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pandas as pd
import pytrec_eval
from nfcorpus import read_nfcorpus

from rageval_pipeline.core.io.ranking import to_document_level
from rageval_pipeline.core.retrieval.base import execute
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.dense import DenseIndex
from rageval_pipeline.core.retrieval.fusion import rrf
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus

DEPTH = 100  # members retrieve 100 per query, as the fused run's depth


def ndcg10(run: pd.DataFrame, qrels: dict[str, dict[str, int]]) -> float:
    """Mean nDCG@10 over the judged queries, on source documents (trec_eval via pytrec_eval)."""
    docs = to_document_level(run).dropna(subset=["doc_id"])
    as_dict: dict[str, dict[str, float]] = {}
    for qid, did, score in docs[["query_id", "doc_id", "score"]].itertuples(index=False):
        as_dict.setdefault(qid, {})[did] = float(score)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(as_dict)
    return sum(m["ndcg_cut_10"] for m in per_query.values()) / len(qrels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zip", type=Path, default=Path("/work/shared/data/beir/nfcorpus.zip"))
    parser.add_argument(
        "--storage", type=Path, default=Path(os.environ.get("RAGEVAL_STORAGE", "data/storage"))
    )
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    corpus, queries, qrels = read_nfcorpus(args.zip)
    chunks = chunk_corpus(corpus, ChunkingConfig(), ingested_at="1970-01-01T00:00:00Z")

    bm25_run = execute(BM25Index.build(chunks).search, queries, DEPTH)
    t0 = time.perf_counter()
    dense = DenseIndex.build(chunks, args.storage / "embeddings", batch_size=args.batch_size)
    build_s = time.perf_counter() - t0
    dense_run = execute(dense.search, queries, DEPTH)
    fused = rrf([bm25_run, dense_run], k=60, level="document")

    stats = dense.stats
    report = {
        "docs": len(chunks),
        "queries": len(queries),
        "ndcg@10": {
            "bm25": round(ndcg10(bm25_run, qrels), 4),
            "minilm": round(ndcg10(dense_run, qrels), 4),
            "rrf(bm25,minilm)": round(ndcg10(fused, qrels), 4),
        },
        "embedding": {**stats.as_metadata(), "build_seconds": round(build_s, 1)},
        "dense_query_ms_median": round(float(dense_run["latency_ms"].median()), 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
