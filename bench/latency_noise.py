"""False alarms of the latency check on a loaded machine, for unchanged code (issue 36).

One configuration is timed against itself, as the pipeline times a system beside its
baseline's configuration (`core.retrieval.base.execute`: per query, both searches back to back
in alternating order), on techdocs' 50 judged queries with their intents, while N busy-loop
processes (`--hogs`) compete for the cores. The search is a dense retriever's cost without the
model: a float32 matrix-vector product over `--chunks` random 384-dimension vectors and a
top-10 (a few ms per query). Each trial aggregates the run as the pipeline does
(`aggregate.latency_stats`) and asks the gate's rule (`core.gate.latency`, the default policy:
+50% and +5 ms, p50 and p95, groups `all` and `intent=*`, too few timings advisory) whether any
group would block: by the percentiles alone (the rule before issue 36), and with the paired
test on the per-query ratio (the rule now). Every alarm is false: the code is the same.

    PYTHONPATH=$PWD nice .venv/bin/python bench/latency_noise.py --hogs 0 2 8 --trials 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rageval_pipeline.core.gate.latency import exceeds, paired_rise, too_few_for
from rageval_pipeline.core.gate.policy import LatencyTolerance
from rageval_pipeline.core.measures.aggregate import PAIRED, latency_stats
from rageval_pipeline.core.retrieval.base import Hit, execute
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import judged_queries, suite_tables

REPO = Path(__file__).resolve().parent.parent


def searcher(chunks: int, seed: int):
    """A search function with a dense retriever's cost: scores of every chunk, then top 10."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((chunks, 384), dtype=np.float32)
    ids = np.array([f"c{i}" for i in range(chunks)], dtype=object)

    def search(query: str, k: int) -> list[Hit]:
        vector = np.frombuffer(query.encode().ljust(384 * 4, b"\0")[: 384 * 4], np.float32)
        scores = matrix @ np.nan_to_num(vector)
        top = np.argpartition(-scores, k)[:k]
        return [Hit(ids[i], float(scores[i]), ids[i]) for i in top]

    return search


def alarms(run, queries, tolerance: LatencyTolerance) -> tuple[bool, bool]:
    """(alarm by the percentiles alone, alarm with the paired test) over every compared group."""
    rows = latency_stats(run, queries, attributes=tolerance.attributes)
    key = rows["attribute"].where(
        rows["attribute"] == "all", rows["attribute"] + "=" + rows["group"]
    )
    table = {
        (t, g, s): v
        for t, g, s, v in zip(rows["timed"], key, rows["stat"], rows["value"], strict=True)
    }
    groups = sorted({g for t, g, _ in table if t == "system" and tolerance.compares(g)})
    old = new = False
    for group in groups:
        count = int(table[("system", group, "count")])
        pairs = {s: table[(PAIRED, group, s)] for s in ("pairs", "ratio_p50", "ratio_low")}
        for stat in tolerance.stats:
            value, reference = table[("system", group, stat)], table[("baseline", group, stat)]
            if too_few_for(stat, count) or not exceeds(
                value, reference, tolerance.relative, tolerance.floor_ms
            ):
                continue
            old = True
            paired = paired_rise(pairs, tolerance.relative)
            new = new or paired is None or paired[0]
    return old, new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hogs", type=int, nargs="+", default=[0, 2, 8])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20_000)
    args = parser.parse_args()
    tables = suite_tables(load_suite(REPO / "data" / "suites" / "techdocs"))
    queries = judged_queries(tables.queries, tables.qrels, "test")
    system, beside = searcher(args.chunks, 1), searcher(args.chunks, 1)  # the same configuration
    tolerance = LatencyTolerance()
    print(f"{len(queries)} queries, {args.chunks} chunks, {args.trials} trials per load")
    print(
        "| CPU hogs | load average (1 min) | p50 [all] ms, median | false alarms: percentiles | "
        "false alarms: paired test |"
    )
    print("| --- | --- | --- | --- | --- |")
    for hogs in args.hogs:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        try:
            time.sleep(2 if hogs else 0)
            old = new = 0
            p50s = []
            for _ in range(args.trials):
                run = execute(system, queries, 10, baseline=beside)
                first = run.groupby("query_id")["latency_ms"].first()
                p50s.append(float(np.median(first)))
                a, b = alarms(run, tables.queries, tolerance)
                old, new = old + a, new + b
            load = os.getloadavg()[0]
        finally:
            for hog in busy:
                hog.kill()
                hog.wait()
        print(
            f"| {hogs} | {load:.1f} | {np.median(p50s):.1f} | {old}/{args.trials} | "
            f"{new}/{args.trials} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
