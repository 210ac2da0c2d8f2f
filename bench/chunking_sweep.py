"""Chunking sweep on the bundled suites: BM25 and dense under several chunkings, judged by nuggets,
per chunk (nDCG@10, EvidenceRecall@10, Tokens@10) and at equal token budgets (issue 33:
EvidenceRecall and TokenPrecision at 512, 1024 and 2048 tokens, what compares chunkings).

Each system is scored at chunk level: under the reference chunking by the suite's own chunk
judgments, under any other by the qrels derived from the spans (`suites.derived`). The spans are
the suite's own, read as the pipeline's metrics step reads them (`loaders.load_part`,
`derived.suite_evidence`), so the table follows whatever judgments the checkout holds. Means
come with their 95% bootstrap intervals (`aggregate.mean_table`). Embeddings go to the
pipeline's content-addressed cache, so a second sweep embeds nothing.

    HF_HUB_OFFLINE=1 nice .venv/bin/python bench/chunking_sweep.py [--suite NAME ...] [--bm25-only]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from rageval_pipeline.core.measures.defaults import budget_measures
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.retrieval.base import execute
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.dense import DenseIndex
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.suites.derived import suite_evidence
from rageval_pipeline.core.suites.loaders import load_dataset, load_part

SUITES = Path(__file__).resolve().parents[1] / "data" / "suites"
DEPTH = 100  # the pipeline's top k
CHUNKINGS = {
    "reference": ChunkingConfig(strategy="reference"),
    "fixed 64/0": ChunkingConfig(strategy="fixed", size=64, overlap=0),
    "sentence 48/0": ChunkingConfig(strategy="sentence", size=48, overlap=0),
    "fixed 128/32": ChunkingConfig(strategy="fixed", size=128, overlap=32),
    "fixed 256/64": ChunkingConfig(strategy="fixed", size=256, overlap=64),
    "fixed 512/128": ChunkingConfig(strategy="fixed", size=512, overlap=128),
    "sentence 128/0": ChunkingConfig(strategy="sentence", size=128, overlap=0),
    "recursive 128": ChunkingConfig(strategy="recursive", size=128),
}
COLUMNS = ("nDCG@10", "Tokens@10", *budget_measures())


def sweep(suite: Path, storage: Path, *, dense: bool) -> pd.DataFrame:
    data = load_dataset(suite)
    qrels = data.qrels[data.qrels["split"] == "test"]
    queries = data.queries[data.queries["query_id"].isin(qrels["query_id"])]
    reference = data.reference_chunking
    spans = load_part(suite, "spans", dataset=suite.name)
    spans = spans[spans["split"] == "test"]
    rows = []
    for label, config in CHUNKINGS.items():
        chunking = config.resolve(reference)
        chunks = chunk_corpus(data.corpus, chunking, ingested_at="1970-01-01T00:00:00Z")
        evidence = suite_evidence(spans, data.corpus, lambda c=chunks: c)
        indexes = {"bm25": BM25Index.build(chunks)}
        if dense:
            indexes["dense"] = DenseIndex.build(chunks, storage / "embeddings")
        for system, index in indexes.items():
            run = execute(index.search, queries, DEPTH)
            results = measure_run(
                run,
                qrels,
                queries,
                chunk_level=chunking == reference,
                measures=COLUMNS,
                evidence=evidence,
            )
            means = results.means.set_index("measure")  # measure_run's mean_table
            row = {"suite": suite.name, "system": system, "chunking": label, "chunks": len(chunks)}
            for measure in COLUMNS:
                value, low, high = means.loc[measure, ["value", "ci_low", "ci_high"]]
                row[measure] = f"{value:.3f} [{low:.3f}, {high:.3f}]"
                if measure == "Tokens@10":
                    row[measure] = f"{value:.0f} [{low:.0f}, {high:.0f}]"
            rows.append(row)
            print(row, flush=True)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--storage", type=Path, default=Path(os.environ.get("RAGEVAL_STORAGE", "data/storage"))
    )
    parser.add_argument("--bm25-only", action="store_true", help="skip the dense system")
    parser.add_argument("--suite", action="append", help="bundled suites (default: both)")
    args = parser.parse_args()
    names = args.suite or ["techdocs", "hotel"]
    tables = [sweep(SUITES / name, args.storage, dense=not args.bm25_only) for name in names]
    print(pd.concat(tables).to_markdown(index=False))


if __name__ == "__main__":
    main()
