"""`rageval eval` on files against pandas + pytrec_eval and trec_eval, side by side, per shape.

Writes each shape's files once (from `bench/metrics.py`'s generator), then runs every
contender as its own process under `/usr/bin/time`, alternating, so each figure includes its
imports, reading the files and scoring, and peak RSS is the whole process's. All compute
nDCG@10, R@100 and RR. Shapes:

- `untied`: 5,000 queries x 1,000 docs (5M rows), scores with 5 decimals (few ties), TREC;
- `ties`: the same rows, scores rounded to 2 decimals (about a tenth of the rows tie), TREC;
- `parquet`: the `ties` run as Parquet (query_id, doc_id, score);
- `wide-trec`, `wide-parquet`: 50,000 queries x 100 docs, scores rounded to 2 decimals.

trec_eval's C binary (`--trec-eval PATH`, built from usnistgov/trec_eval optimised: its
Makefile builds `-g` alone, so `make CFLAGS='-O2 -I. -DVERSIONID=\"10.0-rc3\"'`) reads the TREC
text of each shape (of a Parquet shape: the same run as text). Each
shape's per-query values are compared with pytrec_eval's (untimed, `--format json`); the
largest difference is printed. Also times `rageval --help`.

    .venv/bin/python bench/eval_files.py [--repeat 3] [--dir D] [--trec-eval PATH]
        [--shape ties --shape parquet ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from metrics import MEASURES, TREC_NAMES, make_tables  # bench/ is the script's own folder

# The pandas path: read with pandas, score with pytrec_eval; per-query JSON on demand.
BASELINE = """
import json, sys, pandas as pd, pytrec_eval
qrels_path, run_path, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
qrels = pd.read_csv(qrels_path, sep=" ", header=None, names=["q", "it", "d", "rel"],
                    dtype={"q": str, "d": str, "rel": int})
if run_path.endswith(".parquet"):
    run = pd.read_parquet(run_path).rename(columns={"query_id": "q", "doc_id": "d"})
else:
    run = pd.read_csv(run_path, sep=" ", header=None,
                      names=["q", "it", "d", "rank", "score", "tag"],
                      dtype={"q": str, "d": str, "score": float})
qrel_dict, run_dict = {}, {}
for q, d, r in zip(qrels["q"].tolist(), qrels["d"].tolist(), qrels["rel"].tolist()):
    qrel_dict.setdefault(q, {})[d] = r
for q, d, s in zip(run["q"].tolist(), run["d"].tolist(), run["score"].tolist()):
    run_dict.setdefault(q, {})[d] = s
scores = pytrec_eval.RelevanceEvaluator(qrel_dict, set(names)).evaluate(run_dict)
if len(sys.argv) > 4:
    json.dump(scores, open(sys.argv[4], "w"))
for name in names:
    values = [v[name] for v in scores.values()]
    print(name, sum(values) / len(values))
"""
# (queries, docs per query, score decimals, Parquet run)
SHAPES = {
    "untied": (5000, 1000, 5, False),
    "ties": (5000, 1000, 2, False),
    "parquet": (5000, 1000, 2, True),
    "wide-trec": (50000, 100, 2, False),
    "wide-parquet": (50000, 100, 2, True),
}
TREC_EVAL_MEASURES = ("-m", "ndcg_cut.10", "-m", "recall.100", "-m", "recip_rank")


def write_files(folder: Path, shape: str, judged: int) -> tuple[Path, Path, Path]:
    """(qrels, run as scored, the run as TREC text) of a shape, written once."""
    n_queries, n_docs, decimals, parquet = SHAPES[shape]
    stem = f"{n_queries}x{n_docs}-d{decimals}-j{judged}"
    qrels_path, text_path = folder / f"qrels-{stem}.trec", folder / f"run-{stem}.trec"
    run_path = folder / f"run-{stem}.parquet" if parquet else text_path
    if qrels_path.exists() and text_path.exists() and run_path.exists():
        return qrels_path, run_path, text_path
    qrels, run = make_tables(n_queries, n_docs, n_judged=judged)
    run["score"] = run["score"].round(decimals)
    qrels_text = qrels["query_id"] + " 0 " + qrels["doc_id"] + " " + qrels["relevance"].astype(str)
    qrels_path.write_text("\n".join(qrels_text) + "\n")
    rank = run.groupby("query_id", sort=False).cumcount() + 1
    scores = run["score"].map(repr)
    lines = run["query_id"] + " Q0 " + run["doc_id"] + " " + rank.astype(str) + " " + scores
    text_path.write_text("\n".join(lines + " bench") + "\n")
    if parquet:
        run.to_parquet(run_path, index=False)
    return qrels_path, run_path, text_path


def timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one process."""
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *argv], capture_output=True, text=True, check=True
    )
    seconds, kb = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kb) / 1024, done.stdout


def largest_difference(ours: dict, theirs: dict) -> float:
    """The largest |ours - pytrec_eval| over every query and measure pytrec_eval scored."""
    worst = 0.0
    for query, values in theirs.items():
        for trec_name, name in TREC_NAMES.items():
            worst = max(worst, abs(ours[query][name] - values[trec_name]))
    return worst


def side_by_side(args: argparse.Namespace, shape: str) -> dict[str, object]:
    qrels, run, text = write_files(args.dir, shape, args.judged)
    rageval = Path(sys.executable).parent / "rageval"
    measures = [flag for m in MEASURES for flag in ("-m", m)]
    trec = ",".join(TREC_NAMES)
    contenders = {
        "rageval eval": [str(rageval), "eval", str(qrels), str(run), *measures],
        "pandas + pytrec_eval": [sys.executable, "-c", BASELINE, str(qrels), str(run), trec],
    }
    if args.trec_eval:
        contenders["trec_eval"] = [args.trec_eval, *TREC_EVAL_MEASURES, str(qrels), str(text)]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(args.repeat):
        for name, argv in contenders.items():
            seconds, mb, _ = timed(argv)
            times[name].append((seconds, mb))
    with tempfile.TemporaryDirectory() as scratch:
        theirs_path = Path(scratch) / "pytrec.json"
        subprocess.run(
            [*contenders["pandas + pytrec_eval"], str(theirs_path)], check=True, capture_output=True
        )
        theirs = json.loads(theirs_path.read_text())
    ours_json = subprocess.run(
        [*contenders["rageval eval"], "--format", "json"], capture_output=True, check=True
    ).stdout
    worst = largest_difference(json.loads(ours_json)["per_query"], theirs)
    return {"shape": shape, "times": times, "worst": worst, "queries": len(theirs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--judged", type=int, default=30, help="judgments per query (0-3)")
    parser.add_argument("--shape", action="append", choices=list(SHAPES))
    parser.add_argument(
        "--trec-eval", help="trec_eval's binary, built -O2 (see the docstring); else not measured"
    )
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "rageval-bench")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    results = [side_by_side(args, shape) for shape in args.shape or list(SHAPES)]
    load = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
    print(f"best of {args.repeat} (peak RSS of the best run); load average {load}")
    names = list(results[0]["times"])
    print("| shape | " + " | ".join(names) + " | x pandas | x trec_eval | max |diff| |")
    print("|---" * (len(names) + 4) + "|")
    for result in results:
        best = {n: min(result["times"][n]) for n in names}
        cells = [f"{s:.2f} s ({mb:,.0f} MB)" for s, mb in best.values()]
        ours = best["rageval eval"][0]
        ratio = best["pandas + pytrec_eval"][0] / ours
        versus_c = f"{best['trec_eval'][0] / ours:.1f}x" if "trec_eval" in best else "-"
        row = [result["shape"], *cells, f"{ratio:.1f}x", versus_c, f"{result['worst']:.1e}"]
        print("| " + " | ".join(row) + " |")
    for result in results:
        every = {n: [round(s, 2) for s, _ in t] for n, t in result["times"].items()}
        print(result["shape"], every)
    starts = [timed([str(Path(sys.executable).parent / "rageval"), "--help"])[0] for _ in range(5)]
    print(f"rageval --help {min(starts):.2f} s (best of 5; /usr/bin/time: 10 ms steps)")


if __name__ == "__main__":
    main()
