"""Metrics engine benchmark: our evaluate() against pytrec_eval on one large synthetic run.

5,000 queries x 1,000 retrieved documents (5M rows), 100 graded judgments per query (half of
them on retrieved documents), measures nDCG@10 + R@100 + RR. Both engines start from the same
in-memory tables; pytrec_eval's time is split into building its dicts and evaluating. ranx is
not installed here, so it is not compared. Peak memory is measured in a child process per engine
(ru_maxrss growth over the same data), so one engine's peak cannot hide the other's.

    .venv/bin/python bench/metrics.py [--queries 5000] [--docs 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from rageval_pipeline.core.measures import evaluate

MEASURES = ("nDCG@10", "R@100", "RR")
TREC_NAMES = {"ndcg_cut_10": "nDCG@10", "recall_100": "R@100", "recip_rank": "RR"}


def make_tables(
    n_queries: int, n_docs: int, n_judged: int = 100, corpus: int = 1_000_000, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run in retriever order (score desc per query, a few ties) and graded qrels."""
    rng = np.random.default_rng(seed)
    # Distinct within a query (stride * n_docs < corpus), overlapping across queries.
    stride = corpus // n_docs - 1
    offsets = rng.integers(0, corpus, (n_queries, 1))
    doc_numbers = (
        rng.permuted(np.tile(np.arange(n_docs), (n_queries, 1)), axis=1) * stride + offsets
    ) % corpus
    docs = np.char.add("doc", doc_numbers.astype(str))
    scores = -np.sort(-np.round(rng.random((n_queries, n_docs)) * 50, 5), axis=1)
    query_ids = np.char.add("q", np.arange(n_queries).astype(str))
    run = pd.DataFrame(
        {
            "query_id": pd.array(np.repeat(query_ids, n_docs), dtype="str"),
            "doc_id": pd.array(docs.ravel(), dtype="str"),
            "score": scores.ravel(),
        }
    )
    retrieved = docs[:, : n_judged // 2 * 2 : 2]  # every other one of the top n_judged
    n_unretrieved = n_queries * (n_judged - retrieved.shape[1])
    unretrieved = np.char.add("unret", np.arange(n_unretrieved).astype(str))
    judged = np.concatenate([retrieved, unretrieved.reshape(n_queries, -1)], axis=1)
    qrels = pd.DataFrame(
        {
            "query_id": pd.array(np.repeat(query_ids, n_judged), dtype="str"),
            "doc_id": pd.array(judged.ravel(), dtype="str"),
            "relevance": rng.integers(0, 4, n_queries * n_judged).astype(np.int32),
        }
    )
    return qrels, run


def run_ours(qrels: pd.DataFrame, run: pd.DataFrame) -> pd.DataFrame:
    return evaluate(qrels, run, MEASURES)


def trec_dicts(qrels: pd.DataFrame, run: pd.DataFrame) -> tuple[dict, dict]:
    qrel_dict: dict[str, dict[str, int]] = {}
    columns = (qrels[c].tolist() for c in ("query_id", "doc_id", "relevance"))
    for q, d, r in zip(*columns, strict=True):
        qrel_dict.setdefault(q, {})[d] = r
    run_dict: dict[str, dict[str, float]] = {}
    for q, d, s in zip(*(run[c].tolist() for c in ("query_id", "doc_id", "score")), strict=True):
        run_dict.setdefault(q, {})[d] = s
    return qrel_dict, run_dict


def run_pytrec(qrel_dict: dict, run_dict: dict) -> dict:
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrel_dict, set(TREC_NAMES))
    return evaluator.evaluate(run_dict)


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def _peak_growth_mb(engine: str, n_queries: int, n_docs: int) -> float:
    """Run one engine in a child process and return its peak RSS growth over the loaded data."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--memory-child",
            engine,
            "--queries",
            str(n_queries),
            "--docs",
            str(n_docs),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip())


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _memory_child(engine: str, n_queries: int, n_docs: int) -> None:
    qrels, run = make_tables(n_queries, n_docs)
    inputs = trec_dicts(qrels, run) if engine == "pytrec_eval" else (qrels, run)
    del qrels, run
    # Linux: writing 5 to clear_refs resets the peak (VmHWM) to the current RSS, so building the
    # inputs does not count.
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    before = _status_kb("VmRSS")
    (run_pytrec if engine == "pytrec_eval" else run_ours)(*inputs)
    print((_status_kb("VmHWM") - before) / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-child", choices=["ours", "pytrec_eval"])
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(args.memory_child, args.queries, args.docs)
        return

    qrels, run = make_tables(args.queries, args.docs)
    print(f"run rows {len(run):,}, judgments {len(qrels):,}, measures {', '.join(MEASURES)}")
    ours = [_timed(run_ours, qrels, run) for _ in range(args.repeat)]
    shuffled = run.sample(frac=1.0, random_state=1).reset_index(drop=True)
    t_shuffled, _ = _timed(run_ours, qrels, shuffled)
    t_dicts, (qrel_dict, run_dict) = _timed(trec_dicts, qrels, run)
    trec = [_timed(run_pytrec, qrel_dict, run_dict) for _ in range(args.repeat)]

    mine = ours[0][1].pivot(index="query_id", columns="measure", values="value")
    theirs = pd.DataFrame(trec[0][1]).T.rename(columns=TREC_NAMES)[list(MEASURES)]
    worst = float(np.abs(mine.loc[theirs.index, list(MEASURES)] - theirs).to_numpy().max())

    t_ours = min(t for t, _ in ours)
    t_trec = min(t for t, _ in trec)
    print(f"ours, first call (no warm-up)    {ours[0][0]:.3f} s")
    print(f"ours, best of {args.repeat}                {t_ours:.3f} s")
    print(f"ours, rows shuffled              {t_shuffled:.3f} s")
    print(f"pytrec_eval build dicts          {t_dicts:.3f} s")
    print(f"pytrec_eval evaluate, best of {args.repeat} {t_trec:.3f} s")
    print(f"speed-up (evaluate vs evaluate)  {t_trec / t_ours:.1f}x")
    print(f"largest per-query difference     {worst:.1e}")
    for engine in ("ours", "pytrec_eval"):
        growth = _peak_growth_mb(engine, args.queries, args.docs)
        print(f"peak RSS growth, {engine:<12}    {growth:.0f} MB")


if __name__ == "__main__":
    main()
