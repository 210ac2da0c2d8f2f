"""Sharded embedding wall time on nfcorpus: one shard worker against two (multiprocess
executor, `max_concurrent` 1 and 2), side by side in one script run, through the real
`dagster job execute` of `evaluate_dense`'s `dense__index` (split, two shard steps, merge).

A fixed sample of nfcorpus (the first `--docs` documents, default 1,000) is written as a
BEIR folder under a temporary pipeline home; each configuration starts from an empty embedding
cache (the chunks are reused). Figures: the merge step's overall line (wall time from split to
merge, everything included: process starts, model loads, cache writes) and each shard step's
model throughput. Usage (heavy: run it nice'd, once):

    nice -n 10 python bench/shards.py /work/shared/data/beir/nfcorpus.zip --docs 1000
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.nfcorpus import read_nfcorpus

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SUITE = "nfcorpus-sample"  # a bundled suite may not shadow a BEIR name
OVERALL = re.compile(r"dense index for nfcorpus-sample: (\{[^}]*\})")
SHARD = re.compile(r"dense (shard \d+/\d+ \(\w+\)) for nfcorpus-sample: (\{[^}]*\})")


def pipeline_home(root: Path, archive: Path, docs: int) -> dict[str, str]:
    """A data folder with the nfcorpus sample as a bundled BEIR suite, and the dense system
    in 2 shards; the RAGEVAL_* variables naming it."""
    corpus, queries, qrels = read_nfcorpus(archive)
    corpus = corpus.head(docs)
    kept = set(corpus["doc_id"])
    suite = root / "data" / "suites" / SUITE
    (suite / "qrels").mkdir(parents=True)
    rows = [
        {"_id": r.doc_id, "title": r.title, "text": r.text} for r in corpus.itertuples(index=False)
    ]
    (suite / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    judged = [(q, d, g) for q, docs_ in qrels.items() for d, g in docs_.items() if d in kept]
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{g}" for q, d, g in judged)]
    (suite / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    asked = queries[queries["query_id"].isin({q for q, _, _ in judged})]
    (suite / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": t}) + "\n" for q, t in asked[["query_id", "text"]].values
        )
    )
    dense = {"retriever": "dense", "shards": 2, "chunking": {"strategy": "reference"}}
    (root / "data" / "systems.yaml").write_text(json.dumps({"systems": {"dense": dense}}))
    shutil.copy(REPO / "data" / "gate.yaml", root / "data" / "gate.yaml")
    (root / "data" / "baselines").mkdir()
    (root / "dagster_home").mkdir()
    return {
        "RAGEVAL_DATA": str(root / "data"),
        "RAGEVAL_STORAGE": str(root / "storage"),
        "RAGEVAL_BASELINES": str(root / "data" / "baselines"),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO),
    }


def run_index(root: Path, env: dict[str, str], workers: int) -> tuple[dict, list]:
    """The index built from an empty cache with `workers` shard steps at once."""
    for folder in ("embeddings", "indexes"):
        shutil.rmtree(root / "storage" / folder, ignore_errors=True)
    config = root / f"workers-{workers}.yaml"
    config.write_text(f"execution: {{config: {{multiprocess: {{max_concurrent: {workers}}}}}}}\n")
    command = [
        *(str(BIN / "dagster"), "job", "execute", "-m", "rageval_pipeline"),
        *("-j", "evaluate_dense", "-o", "*dense__index", "-c", str(config)),
        *("--tags", json.dumps({"dagster/partition": SUITE})),
    ]
    done = subprocess.run(
        command, env={**os.environ, **env}, cwd=root, capture_output=True, text=True
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(output[-4000:])
    overall = ast.literal_eval(OVERALL.search(output)[1])
    shards = [(label, ast.literal_eval(stats)) for label, stats in SHARD.findall(output)]
    return overall, shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--docs", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
        root = Path(tmp)
        env = pipeline_home(root, args.archive, args.docs)
        print(
            "| shard workers | wall s (split to merge) | docs/s overall | per shard: docs, docs/s |"
        )
        print("| --- | --- | --- | --- |")
        for workers in (1, 2):
            overall, shards = run_index(root, env, workers)
            per_shard = "; ".join(f"{s['n_chunks']}, {s['docs_per_s']}" for _, s in shards)
            print(f"| {workers} | {overall['seconds']} | {overall['docs_per_s']} | {per_shard} |")


if __name__ == "__main__":
    main()
