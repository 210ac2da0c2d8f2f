"""`rageval eval` on TREC files against pandas + pytrec_eval, side by side, in one script run.

Writes a TREC run (5,000 queries x 1,000 docs = 5M lines) and TREC qrels (100 graded judgments
per query) once, from `bench/metrics.py`'s generator, then runs each contender as its own
process under `/usr/bin/time`, so each figure includes its imports, reading the files and
scoring, and peak RSS is the whole process's. Both compute nDCG@10, R@100 and RR means.
Also times `rageval --help` (the CLI's start, which loads no pandas, scipy, torch or Dagster).

    .venv/bin/python bench/eval_files.py [--queries 5000] [--docs 1000] [--repeat 2] [--dir D]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from metrics import MEASURES, TREC_NAMES, make_tables  # bench/ is the script's own folder

BASELINE = """
import sys, pandas as pd, pytrec_eval
qrels_path, run_path, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
qrels = pd.read_csv(qrels_path, sep=" ", header=None, names=["q", "it", "d", "rel"],
                    dtype={"q": str, "d": str, "rel": int})
run = pd.read_csv(run_path, sep=" ", header=None, names=["q", "it", "d", "rank", "score", "tag"],
                  dtype={"q": str, "d": str, "score": float})
qrel_dict, run_dict = {}, {}
for q, d, r in zip(qrels["q"].tolist(), qrels["d"].tolist(), qrels["rel"].tolist()):
    qrel_dict.setdefault(q, {})[d] = r
for q, d, s in zip(run["q"].tolist(), run["d"].tolist(), run["score"].tolist()):
    run_dict.setdefault(q, {})[d] = s
scores = pytrec_eval.RelevanceEvaluator(qrel_dict, set(names)).evaluate(run_dict)
for name in names:
    values = [v[name] for v in scores.values()]
    print(name, sum(values) / len(values))
"""


def write_files(folder: Path, n_queries: int, n_docs: int) -> tuple[Path, Path]:
    qrels_path = folder / f"qrels-{n_queries}.trec"
    run_path = folder / f"run-{n_queries}x{n_docs}.trec"
    if qrels_path.exists() and run_path.exists():
        return qrels_path, run_path
    qrels, run = make_tables(n_queries, n_docs)
    qrels_text = qrels["query_id"] + " 0 " + qrels["doc_id"] + " " + qrels["relevance"].astype(str)
    qrels_path.write_text("\n".join(qrels_text) + "\n")
    rank = run.groupby("query_id", sort=False).cumcount() + 1
    lines = (
        run["query_id"]
        + " Q0 "
        + run["doc_id"]
        + " "
        + rank.astype(str)
        + " "
        + run["score"].map(repr)
        + " bench"
    )
    run_path.write_text("\n".join(lines) + "\n")
    return qrels_path, run_path


def timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one process."""
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *argv], capture_output=True, text=True, check=True
    )
    seconds, kb = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kb) / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "rageval-bench")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    qrels, run = write_files(args.dir, args.queries, args.docs)
    rageval = Path(sys.executable).parent / "rageval"
    measures = [flag for m in MEASURES for flag in ("-m", m)]
    ours = [timed([str(rageval), "eval", str(qrels), str(run), *measures])]
    trec = list(TREC_NAMES)
    theirs = [timed([sys.executable, "-c", BASELINE, str(qrels), str(run), ",".join(trec)])]
    for _ in range(args.repeat - 1):
        ours.append(timed([str(rageval), "eval", str(qrels), str(run), *measures]))
        theirs.append(timed([sys.executable, "-c", BASELINE, str(qrels), str(run), ",".join(trec)]))
    starts = [timed([str(rageval), "--help"])[0] for _ in range(5)]
    mine = {line.split()[0]: float(line.split()[-1]) for line in ours[0][2].splitlines()}
    other = {TREC_NAMES[n]: float(v) for n, v in (x.split() for x in theirs[0][2].splitlines())}
    worst = max(abs(mine[m] - other[m]) for m in MEASURES)
    best_ours, best_theirs = min(t for t, _, _ in ours), min(t for t, _, _ in theirs)
    print(f"run {run.stat().st_size / 1e6:.0f} MB, qrels {qrels.stat().st_size / 1e6:.0f} MB")
    print(f"rageval eval               {best_ours:.2f} s, peak RSS {ours[0][1]:.0f} MB")
    print(f"pandas + pytrec_eval       {best_theirs:.2f} s, peak RSS {theirs[0][1]:.0f} MB")
    print(f"speed-up                   {best_theirs / best_ours:.1f}x (best of {args.repeat})")
    print(f"largest mean difference    {worst:.1e} (means printed to 4 decimals)")
    print(f"rageval --help             {min(starts):.2f} s (best of 5; /usr/bin/time: 10 ms steps)")
    print("all times:", [round(t, 2) for t, _, _ in ours], [round(t, 2) for t, _, _ in theirs])


if __name__ == "__main__":
    main()
