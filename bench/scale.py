"""Scale bench: BM25, exact dense search (and an ANN index) and warehouse history at size.

Synthetic data, seeded, so every run measures the same work:
- corpora of short documents (8-24 words from a 30,000-word Zipfian vocabulary) and 10,000
  queries of 2-4 words (the 100 most frequent words left out, as stopwords would be);
- 384-d float32 unit vectors around 2,000 cluster centres (real embeddings cluster; uniform
  random vectors would make any ANN index look useless), stored with `np.save`;
- a warehouse of 30 runs x 10,000 queries x 100 query_metrics-like rows (measures P@1..P@100)
  written and read through the project's own `Warehouse`, `rageval history` and gate queries.
Each measurement runs in its own child process; peak memory is that process's peak RSS
(imports and generated data included).

    .venv/bin/python bench/scale.py [--sizes 10k,100k,1M] [--queries 10000] [--no-history]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

VOCABULARY = 30_000
DIM = 384


def parse_size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("km")) * factor)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def words(rng: np.random.Generator, n: int, low: int, high: int, skip: int = 0) -> list[str]:
    """`n` texts of `low`..`high` words drawn from a Zipfian vocabulary ("w123" = rank 123)."""
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.07
    weights[:skip] = 0
    lengths = rng.integers(low, high + 1, n)
    ids = rng.choice(VOCABULARY, lengths.sum(), p=weights / weights.sum())
    vocab = np.array([f"w{i}" for i in range(VOCABULARY)], dtype=object)
    return [" ".join(part) for part in np.split(vocab[ids], np.cumsum(lengths)[:-1])]


def bm25_child(size: int, n_queries: int, work: Path) -> dict:
    import bm25s

    from rageval_pipeline.core.retrieval.bm25 import BM25Index

    rng = np.random.default_rng(size)
    ids = [f"d{i}" for i in range(size)]
    chunks = pd.DataFrame(
        {"chunk_id": ids, "doc_id": ids, "title": "", "text": words(rng, size, 8, 24)}
    )
    queries = words(rng, n_queries, 2, 4, skip=100)
    generated_mb = peak_mb()
    start = time.perf_counter()
    index = BM25Index.build(chunks)
    build_s = time.perf_counter() - start
    index.save(work / f"bm25-{size}")
    start = time.perf_counter()
    for query in queries:
        index.search(query, 100)
    query_s = time.perf_counter() - start
    build_peak = peak_mb()
    del index, chunks
    # The saved index memory-mapped: what a query process would need to hold.
    mapped = bm25s.BM25.load(str(work / f"bm25-{size}"), mmap=True)
    start = time.perf_counter()
    for query in queries[:1000]:
        mapped.get_scores(query.split())
    mmap_ms = (time.perf_counter() - start) / min(1000, n_queries) * 1000
    disk = sum(p.stat().st_size for p in (work / f"bm25-{size}").rglob("*") if p.is_file())
    return dict(
        docs=size,
        index_s=round(build_s, 1),
        docs_per_s=round(size / build_s),
        query_ms=round(query_s / n_queries * 1000, 2),
        queries_s=round(query_s, 1),
        peak_mb=round(build_peak),
        data_mb=round(generated_mb),
        index_disk_mb=round(disk / 2**20),
        mmap_get_scores_ms=round(mmap_ms, 2),
    )


def unit_vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        noise = rng.standard_normal((hi - lo, DIM), dtype=np.float32) / np.sqrt(DIM)
        block = centres[rng.integers(0, len(centres), hi - lo)] + noise
        out[lo:hi] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def dense_child(size: int, n_queries: int, work: Path) -> dict:
    from rageval_pipeline.core.io.ranking import top_k

    rng = np.random.default_rng(size)
    centres = rng.standard_normal((2000, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    path = work / f"vectors-{size}.npy"
    np.save(path, unit_vectors(rng, centres, size))
    queries = unit_vectors(rng, centres, n_queries)
    start = time.perf_counter()
    vectors = np.load(path)
    load_s = time.perf_counter() - start
    ids = np.asarray([f"d{i}" for i in range(size)], dtype=object)
    exact = []
    start = time.perf_counter()
    for q in queries:  # as DenseIndex.search: one product per query, ties by id
        exact.append(top_k(vectors @ q, ids, 10))
    exact_ms = (time.perf_counter() - start) / n_queries * 1000
    # The same exact search for 64 queries at a time: one matrix product, then each row's top k.
    start = time.perf_counter()
    for lo in range(0, n_queries, 64):
        for scores in queries[lo : lo + 64] @ vectors.T:
            top_k(scores, ids, 10)
    batched_ms = (time.perf_counter() - start) / n_queries * 1000
    result = dict(
        docs=size,
        load_s=round(load_s, 2),
        exact_ms=round(exact_ms, 1),
        exact_batched_ms=round(batched_ms, 1),
        peak_mb=round(peak_mb()),
    )
    result |= ivf(vectors, queries, [set(e) for e in exact], exact_ms)
    return result


def ivf(vectors: np.ndarray, queries: np.ndarray, exact: list[set], exact_ms: float) -> dict:
    """faiss IVF-Flat (inner product): build time, query time and recall@10 against exact."""
    import faiss

    nlist = 1024
    start = time.perf_counter()
    quantizer = faiss.IndexFlatIP(DIM)
    index = faiss.IndexIVFFlat(quantizer, DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    sample = np.random.default_rng(0).choice(len(vectors), min(len(vectors), 64 * nlist), False)
    index.train(vectors[np.sort(sample)])
    index.add(vectors)
    build_s = time.perf_counter() - start
    out: dict = {"ivf_build_s": round(build_s, 1)}
    for nprobe in (8, 32):
        index.nprobe = nprobe
        start = time.perf_counter()
        found = [index.search(q[None, :], 10)[1][0] for q in queries]  # one query at a time
        ms = (time.perf_counter() - start) / len(queries) * 1000
        recall = np.mean([len(set(f.tolist()) & e) / 10 for f, e in zip(found, exact, strict=True)])
        out[f"ivf{nprobe}_ms"] = round(ms, 2)
        out[f"ivf{nprobe}_recall@10"] = round(float(recall), 3)
        out[f"ivf{nprobe}_speedup"] = round(exact_ms / ms, 1)
    return out


def history_child(runs: int, n_queries: int, rows_per_query: int, work: Path) -> dict:
    from datetime import UTC, datetime, timedelta

    from rageval_pipeline.cli.history import run_history
    from rageval_pipeline.core.history.summaries import select_runs, summaries
    from rageval_pipeline.core.storage.warehouse import Warehouse

    warehouse = Warehouse(work / "history" / "rageval.duckdb")
    rng = np.random.default_rng(30)
    query_ids = np.repeat([f"q{i}" for i in range(n_queries)], rows_per_query)
    measures = np.tile([f"P@{j}" for j in range(1, rows_per_query + 1)], n_queries)
    start = time.perf_counter()
    for r in range(runs):
        keys = dict(run_id=f"run{r:02d}", dataset="synthetic", split="test", system=f"s{r % 3}")
        created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=r)
        values = rng.random(len(query_ids))
        per_query = pd.DataFrame({"query_id": query_ids, "measure": measures, "value": values})
        means = per_query.groupby("measure", as_index=False)["value"].mean()
        row = keys | dict(
            fingerprint=f"f{r % 3}", level="document", k=100, n_queries=n_queries,
            dagster_run_id=None, created_at=created, config="{}", finished=True,
        )  # fmt: skip
        tables = {
            "run_metrics": means.assign(**keys, created_at=created),
            "query_metrics": per_query.assign(**keys),
        }
        warehouse.record_run(row, tables)
    write_s = time.perf_counter() - start
    timings = {}
    args = argparse.Namespace(
        dataset="synthetic", system=None, measure="P@10", limit=20, storage=warehouse.path.parent
    )
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        run_history(args)
    timings["history_cli_s"] = time.perf_counter() - start
    start = time.perf_counter()
    latest = select_runs(warehouse)
    timings["latest_runs_s"] = time.perf_counter() - start
    start = time.perf_counter()
    one = summaries(warehouse, latest.head(1))
    timings["gate_summary_1_run_s"] = time.perf_counter() - start
    start = time.perf_counter()
    warehouse.query(
        "SELECT a.query_id, b.value - a.value AS delta FROM query_metrics a JOIN query_metrics b"
        " USING (query_id, measure) WHERE a.run_id = 'run00' AND b.run_id = 'run29'"
        " AND measure = 'P@10'"
    )
    timings["per_query_delta_s"] = time.perf_counter() - start
    size = warehouse.path.stat().st_size
    return dict(
        rows=runs * n_queries * rows_per_query,
        write_s=round(write_s, 1),
        **{k: round(v, 3) for k, v in timings.items()},
        summary_queries=len(one[0].per_query),
        file_mb=round(size / 2**20),
        peak_mb=round(peak_mb()),
    )


def child(argv: list[str]) -> None:
    kind, work, *numbers = argv
    jobs = {"bm25": bm25_child, "dense": dense_child, "history": history_child}
    print(json.dumps(jobs[kind](*map(int, numbers), Path(work))))


def run_child(*args: object) -> dict:
    command = [sys.executable, __file__, "--child", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows)])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k,1M", help="BM25 corpus sizes ('' for none)")
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--dense-sizes", default="100k,1M", help="exact and ANN ('' for none)")
    parser.add_argument("--dense-queries", type=int, default=1_000)
    parser.add_argument("--no-history", action="store_true")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    dense_sizes = [parse_size(s) for s in args.dense_sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="rageval-scale-", dir=args.work) as tmp:
        if sizes:
            bm25 = [run_child("bm25", tmp, size, args.queries) for size in sizes]
            print(table(bm25) + "\n", flush=True)
        if dense_sizes:
            dense = [run_child("dense", tmp, size, args.dense_queries) for size in dense_sizes]
            print(table(dense) + "\n", flush=True)
        if not args.no_history:
            print(table([run_child("history", tmp, 30, args.queries, 100)]), flush=True)


if __name__ == "__main__":
    main()
