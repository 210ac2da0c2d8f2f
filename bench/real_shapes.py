"""Real paired per-query nDCG@10 of changes a team makes, extracted once into real_shapes.json.

The operating characteristics (bench/operating_characteristics.py) resample these pairs rather
than a smooth distribution: real differences are skewed (a few queries lose a lot, many gain a
little), and the gate's interval runs narrow on them. Each shape is a (baseline, run) pair of
per-query nDCG@10 vectors over one suite's judged queries, measured by the pipeline's own
systems and `measure_run`:

- `tweak`: a configuration change of one system (BM25 k1 / b, RRF k);
- `swap`: one system replaced by another (BM25 -> dense, dense -> hybrid, BM25 -> hybrid; on
  nfcorpus BM25 reading the titles alone or the abstracts without their titles);
- `break`: a tweak's run in which a few queries (BREAK_SHARE, at least 2) that the baseline
  answered well (nDCG@10 >= BREAK_FROM) lost their answer (nDCG@10 0, as a run whose list for
  them is wrong), chosen with a fixed seed and listed under `broken`: a sparse breakage while
  the other queries move as the tweak moved them.

Suites: the bundled techdocs and hotel (BM25, dense, RRF on the reference chunking) and the
nfcorpus test split read from the official BEIR zip (BM25 only unless --nfcorpus-dense:
embedding its 3,633 documents on the shared machine, at about 15% of a core, had not
finished after 25 minutes and was stopped). Values are kept to 6 decimals, as stored
per-query values are. About 3 minutes.

    HF_HUB_OFFLINE=1 PYTHONPATH=$PWD nice .venv/bin/python bench/real_shapes.py \
        [--zip /work/shared/data/beir/nfcorpus.zip] [--storage data/storage] [--nfcorpus-dense]
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from bench.nfcorpus import read_nfcorpus
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.retrieval.base import execute
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.dense import DenseIndex
from rageval_pipeline.core.retrieval.fusion import rrf
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.suites.loaders import load_dataset

HERE = Path(__file__).resolve().parent
SHAPES = HERE / "real_shapes.json"
SUITES = HERE.parent / "data" / "suites"
DEPTH = 100
MEASURE = "nDCG@10"
BREAK_SHARE = 0.035  # about the share the issue measured (3.4% of queries sent to 0)
BREAK_FROM = 0.5  # a broken query was answered well before
STAMP = "1970-01-01T00:00:00Z"


def ndcg(run: pd.DataFrame, qrels: pd.DataFrame, queries: pd.DataFrame, chunk: bool) -> pd.Series:
    """Per-query nDCG@10 of a run, indexed by query id (every judged query; 0 when missed)."""
    results = measure_run(run, qrels, queries, chunk_level=chunk, measures=(MEASURE,))
    values = results.per_query.set_index("query_id")["value"]
    return values.reindex(sorted(queries["query_id"]), fill_value=0.0)


def golden_runs(name: str, storage: Path) -> tuple[dict[str, pd.Series], list[tuple]]:
    """Per-query nDCG@10 of BM25 (and tweaks), dense and RRF (and tweaks) on a bundled suite."""
    data = load_dataset(SUITES / name)
    qrels = data.qrels[data.qrels["split"] == "test"]
    queries = data.queries[data.queries["query_id"].isin(qrels["query_id"])]
    chunks = chunk_corpus(data.corpus, data.reference_chunking, ingested_at=STAMP)
    runs: dict[str, pd.DataFrame] = {}
    for label, k1, b in (("bm25", 1.5, 0.75), ("k1=1.2", 1.2, 0.75), ("k1=2.0", 2.0, 0.75)):
        runs[label] = execute(BM25Index.build(chunks, k1=k1, b=b).search, queries, DEPTH)
    for label, b in (("b=0.6", 0.6), ("b=0.9", 0.9)):
        runs[label] = execute(BM25Index.build(chunks, b=b).search, queries, DEPTH)
    dense = DenseIndex.build(chunks, storage / "embeddings")
    runs["dense"] = execute(dense.search, queries, DEPTH)
    for k in (60, 20, 100):
        runs[f"rrf k={k}"] = rrf([runs["bm25"], runs["dense"]], k=k)
    values = {label: ndcg(run, qrels, queries, chunk=True) for label, run in runs.items()}
    plan = [
        ("tweak", "bm25", "k1=1.2"),
        ("tweak", "bm25", "k1=2.0"),
        ("tweak", "bm25", "b=0.6"),
        ("tweak", "bm25", "b=0.9"),
        ("tweak", "rrf k=60", "rrf k=20"),
        ("tweak", "rrf k=60", "rrf k=100"),
        ("swap", "bm25", "dense"),
        ("swap", "dense", "rrf k=60"),
        ("swap", "bm25", "rrf k=60"),
        ("break", "bm25", "k1=1.2"),
    ]
    return values, plan


def nfcorpus_runs(archive: Path, storage: Path | None) -> tuple[dict[str, pd.Series], list[tuple]]:
    """Per-query nDCG@10 of BM25 and its tweaks on the nfcorpus test split (document level);
    with `storage`, dense and RRF too (embedding the corpus takes minutes, then it is cached)."""
    corpus, queries, qrels_dict = read_nfcorpus(archive)
    qrels = pd.DataFrame(
        [(qid, did, rel) for qid, docs in qrels_dict.items() for did, rel in docs.items()],
        columns=["query_id", "doc_id", "relevance"],
    ).assign(split="test", level="document")
    chunks = chunk_corpus(corpus, ChunkingConfig(), ingested_at=STAMP)
    settings = {"bm25": {}, "k1=1.2": {"k1": 1.2}, "k1=0.9": {"k1": 0.9}, "b=0.6": {"b": 0.6}}
    settings |= {"b=0.9": {"b": 0.9}}
    runs = {
        label: execute(BM25Index.build(chunks, **kw).search, queries, DEPTH)
        for label, kw in settings.items()
    }
    plan = [("tweak", "bm25", label) for label in settings if label != "bm25"]
    plan.append(("break", "bm25", "k1=1.2"))
    # Swaps of what BM25 reads: titles alone, or the abstracts without their titles.
    fields = {
        "titles only": corpus.assign(text=corpus["title"], title=""),
        "no titles": corpus.assign(title=""),
    }
    for label, read in fields.items():
        chunks_of = chunk_corpus(read, ChunkingConfig(), ingested_at=STAMP)
        runs[label] = execute(BM25Index.build(chunks_of).search, queries, DEPTH)
        plan.append(("swap", "bm25", label))
    if storage is not None:
        runs["dense"] = execute(
            DenseIndex.build(chunks, storage / "embeddings").search, queries, DEPTH
        )
        runs["rrf k=60"] = rrf([runs["bm25"], runs["dense"]], k=60, level="document")
        plan += [("swap", "bm25", "dense"), ("swap", "dense", "rrf k=60")]
        plan += [("swap", "bm25", "rrf k=60")]
    return {label: ndcg(run, qrels, queries, chunk=False) for label, run in runs.items()}, plan


def broken(baseline: np.ndarray, seed: int) -> list[int]:
    """A few queries the baseline answered well (BREAK_SHARE of them, at least 2), to break."""
    answered = np.flatnonzero(baseline >= BREAK_FROM)
    count = max(2, round(BREAK_SHARE * len(baseline)))
    return sorted(int(i) for i in np.random.default_rng(seed).choice(answered, count, False))


def shapes(sources: dict[str, Callable[[], tuple[dict, list]]]) -> list[dict]:
    out = []
    for suite, source in sources.items():
        values, plan = source()
        for kind, before, after in plan:
            a = values[before].to_numpy(dtype=float)
            b = values[after].to_numpy(dtype=float, copy=True)
            lost = broken(a, seed=len(out)) if kind == "break" else []
            b[lost] = 0.0
            name = f"{suite} {before} -> {after}" + (" + broken" if kind == "break" else "")
            d = b - a
            out.append(
                {
                    "name": name,
                    "suite": suite,
                    "kind": kind,
                    "baseline": [round(float(x), 6) for x in a],
                    "run": [round(float(x), 6) for x in b],
                    "broken": lost,
                }
            )
            print(
                f"{name}: n {len(d)}, mean {a.mean():.4f} -> {b.mean():.4f}, delta "
                f"{d.mean():+.4f}, sd {d.std(ddof=1):.4f}, skew {pd.Series(d).skew():+.2f}",
                flush=True,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zip", type=Path, default=Path("/work/shared/data/beir/nfcorpus.zip"))
    parser.add_argument(
        "--storage", type=Path, default=Path(os.environ.get("RAGEVAL_STORAGE", "data/storage"))
    )
    parser.add_argument(
        "--nfcorpus-dense",
        action="store_true",
        help="add dense and RRF swaps on nfcorpus (embedding its corpus takes many minutes)",
    )
    args = parser.parse_args()
    dense = args.storage if args.nfcorpus_dense else None
    found = shapes(
        {
            "techdocs": lambda: golden_runs("techdocs", args.storage),
            "hotel": lambda: golden_runs("hotel", args.storage),
            "nfcorpus": lambda: nfcorpus_runs(args.zip, dense),
        }
    )
    SHAPES.write_text(json.dumps({"measure": MEASURE, "shapes": found}, indent=1) + "\n")
    print(f"wrote {SHAPES}: {len(found)} shapes")


if __name__ == "__main__":
    main()
