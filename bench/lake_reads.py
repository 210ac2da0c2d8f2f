"""How long do the gate's reads take as history grows, on the lake and on the DuckDB file?

Records N evaluations of nfcorpus's shape (323 queries, 10 measures, top-10 rankings, groups
and latency) into each kind of warehouse, then times what the gate reads: one read block with
the latest runs (`select_runs`), their summaries and the dataset's history.

    PYTHONPATH=$PWD .venv/bin/python bench/lake_reads.py --runs 300 [--storage DIR] [--kinds lake]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from rageval_pipeline.core.history.summaries import history, select_runs, summaries
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.choose import open_warehouse

QUERIES, SYSTEMS = 323, ("bm25", "dense", "hybrid")
MEASURES = [
    "nDCG@10",
    "nDCG@100",
    "RR",
    "AP",
    "P@5",
    "P@10",
    "R@10",
    "R@100",
    "R@1000",
    "Success@10",
]


def evaluation(i: int, rng: np.random.Generator) -> tuple[dict, dict[str, pd.DataFrame]]:
    system = SYSTEMS[i % len(SYSTEMS)]
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i)
    run_id = f"{created:%Y%m%dT%H%M%S%fZ}-nfcorpus-{system}"
    keys = dict(run_id=run_id, dataset="nfcorpus", split="test", system=system)
    queries = [f"q{q}" for q in range(QUERIES)]
    per_query = pd.DataFrame(
        dict(
            query_id=np.repeat(queries, len(MEASURES)),
            measure=MEASURES * QUERIES,
            value=rng.random(QUERIES * len(MEASURES)),
        )
    )
    means = per_query.groupby("measure", as_index=False)["value"].mean()
    tables = {
        "run_metrics": means.assign(**keys, created_at=created, ci_low=0.0, ci_high=1.0),
        "query_metrics": per_query.assign(**keys),
        "group_metrics": means.assign(attribute="all", group="all", n_queries=QUERIES, **keys),
        "latency": pd.DataFrame(
            dict(attribute="all", group="all", stat=["p50", "p95"], value=[1.0, 2.0], **keys)
        ),
        "rankings": pd.DataFrame(
            dict(
                query_id=np.repeat(queries, 10),
                rank=list(range(1, 11)) * QUERIES,
                doc_id=[f"d{r}" for r in range(QUERIES * 10)],
                grade=1,
                **keys,
            )
        ),
    }
    run = dict(
        keys,
        fingerprint=f"f{i % len(SYSTEMS)}",
        level="document",
        k=100,
        n_queries=QUERIES,
        dagster_run_id=f"dr{i}",
        created_at=created,
        config="{}",
    )
    return run, tables


def gate_reads(warehouse: BaseWarehouse) -> int:
    with warehouse.read():
        runs = select_runs(warehouse, dataset="nfcorpus")
        summaries(warehouse, runs)
        return len(history(warehouse, "nfcorpus"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--storage", type=Path)
    parser.add_argument("--kinds", nargs="+", default=["duckdb", "lake"])
    args = parser.parse_args()
    storage = args.storage or Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)
    for kind in args.kinds:
        warehouse = open_warehouse(storage / kind, kind=kind)
        start = time.perf_counter()
        for i in range(args.runs):
            run, tables = evaluation(i, rng)
            warehouse.record_run(run, tables)
            warehouse.finish(runs=run["run_id"])
        written = time.perf_counter() - start
        times = []
        for _ in range(3):
            start = time.perf_counter()
            rows = gate_reads(warehouse)
            times.append(time.perf_counter() - start)
        print(
            f"{kind:6s} {args.runs} runs: write {written / args.runs * 1000:.0f} ms/run, "
            f"gate reads {min(times):.2f} s (best of 3; {rows} history rows)"
        )


if __name__ == "__main__":
    main()
