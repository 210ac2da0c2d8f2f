"""Warm re-run of `evaluate_bm25` on nfcorpus against an empty Dagster job and a bare script.

Side by side in one run, each as its own process (interpreter start and imports included):
- `dagster job execute -m rageval_pipeline -j evaluate_bm25` on the nfcorpus partition, the
  archive served from a loopback mirror (`RAGEVAL_BEIR_MIRROR`), fresh storage: one cold run,
  then warm runs (chunks, index and run reused; metrics and gate computed again);
- an empty Dagster job (one no-op op, in-process executor, as the project's jobs) through the
  same CLI: what any job costs;
- the bare script: read the zip, index with bm25s (stemmer and stopwords as ours), retrieve the
  top 100, evaluate nDCG@10, R@100, RR and P@5 with pytrec_eval (`--bare`).
Rounds interleave the three so the machine's other load falls on all alike; medians are
reported, and the best of each (issue 35's reading). Target: (warm - empty) <= 1.5 x bare.

Both Dagster commands use one instance: by default the project's (a fresh `DAGSTER_HOME` with
the repo's dagster.yaml, as `scripts/setup` and `scripts/evaluate` make it), or with
`--instance temporary` the throwaway instance `dagster job execute` creates without a
`DAGSTER_HOME` (slower to create, and SQLite connections to a new folder each run).

    .venv/bin/python bench/warm_rerun.py [--zip PATH] [--rounds 3] [--instance temporary]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EMPTY_JOB = """
import dagster as dg

@dg.op
def noop() -> None:
    pass

@dg.job(executor_def=dg.in_process_executor)
def empty():
    noop()
"""


def bare(archive: Path) -> dict[str, float]:
    """The whole evaluation without the pipeline, as a user would script it."""
    import bm25s
    import pytrec_eval
    import Stemmer
    from nfcorpus import read_nfcorpus

    corpus, queries, qrels = read_nfcorpus(archive)
    stemmer = Stemmer.Stemmer("english")
    texts = (corpus["title"].fillna("") + " " + corpus["text"].fillna("")).tolist()
    model = bm25s.BM25(k1=1.5, b=0.75)
    model.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    tokens = bm25s.tokenize(
        queries["text"].tolist(), stopwords="en", stemmer=stemmer, show_progress=False
    )
    docs, scores = model.retrieve(tokens, k=100, show_progress=False)
    ids = corpus["doc_id"].to_numpy()
    run = {
        qid: {ids[d]: float(s) for d, s in zip(row_docs, row_scores, strict=True) if s > 0}
        for qid, row_docs, row_scores in zip(queries["query_id"], docs, scores, strict=True)
    }
    measures = {"ndcg_cut.10", "recall.100", "recip_rank", "P.5"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = ["ndcg_cut_10", "recall_100", "recip_rank", "P_5"]
    return {m: round(sum(q[m] for q in per_query.values()) / len(qrels), 4) for m in names}


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zip", type=Path, default=Path("/work/shared/data/beir/nfcorpus.zip"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instance", choices=("project", "temporary"), default="project")
    parser.add_argument("--bare", action="store_true", help="run only the bare script, print")
    args = parser.parse_args()
    if args.bare:
        print(json.dumps(bare(args.zip)))
        return

    bin_dir = Path(sys.executable).parent
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=args.zip.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with tempfile.TemporaryDirectory(prefix="rageval-warm-") as tmp:
            work = Path(tmp)
            (work / "empty_job.py").write_text(EMPTY_JOB)
            env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
            env |= {
                "PYTHONPATH": str(REPO),
                "HF_HUB_OFFLINE": "1",
                "RAGEVAL_BEIR_MIRROR": f"http://127.0.0.1:{port}",
                "RAGEVAL_STORAGE": str(work / "storage"),
                "RAGEVAL_BASELINES": str(work / "baselines"),
            }
            if args.instance == "project":
                home = work / "dagster_home"
                home.mkdir()
                (home / "dagster.yaml").write_bytes((REPO / "dagster.yaml").read_bytes())
                env["DAGSTER_HOME"] = str(home)
            dagster = str(bin_dir / "dagster")
            job = [dagster, "job", "execute", "-m", "rageval_pipeline", "-j", "evaluate_bm25"]
            job += ["--tags", json.dumps({"dagster/partition": "nfcorpus"})]
            empty = [dagster, "job", "execute", "-f", str(work / "empty_job.py"), "-j", "empty"]
            bare_cmd = [sys.executable, __file__, "--bare", "--zip", str(args.zip)]
            time.sleep(0.5)  # let the mirror bind
            cold = timed(job, env, work)
            times: dict[str, list[float]] = {"warm": [], "empty": [], "bare": []}
            for _ in range(args.rounds):
                times["empty"].append(timed(empty, env, work))
                times["warm"].append(timed(job, env, work))
                times["bare"].append(timed(bare_cmd, env, work))
            means = subprocess.run(
                bare_cmd, env=env, cwd=work, capture_output=True, text=True, check=True
            ).stdout
    finally:
        server.terminate()
        server.wait()
    median = {k: statistics.median(v) for k, v in times.items()}
    report = {
        "instance": args.instance,
        "cold_s": round(cold, 2),
        **{f"{k}_s": [round(t, 2) for t in v] for k, v in times.items()},
        "median_s": {k: round(v, 2) for k, v in median.items()},
        "warm_minus_empty_over_bare": round((median["warm"] - median["empty"]) / median["bare"], 2),
        "best_s": {k: round(min(v), 2) for k, v in times.items()},
        "best_warm_minus_empty_over_bare": round(
            (min(times["warm"]) - min(times["empty"])) / min(times["bare"]), 2
        ),
        "load_average_after": os.getloadavg(),
        "bare_means": json.loads(means),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
