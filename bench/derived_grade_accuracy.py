"""Derived-grade accuracy: do the chunk grades the nugget rule derives (core.suites.derived)
agree with a reader's grades of the same chunks?

  .venv/bin/python bench/derived_grade_accuracy.py draw ROUND    # the blind sheet (seeded)
  .venv/bin/python bench/derived_grade_accuracy.py check ROUND   # the table, derived afresh

Each round's sheet and the reader's grades are in `bench/derived_grades/round<N>/`; a round's
sample leaves out the pairs of the rounds before it.

`draw` samples, uniformly with the recorded seed, `PER_CELL[round]` (query, chunk) pairs for each
bundled suite and each of two chunkings that are not the suites' reference chunking (fixed
windows of 64 words, chonkie sentence chunks of 48 words), among the pairs where the chunk
shares a token with a nugget (a span graded >= 1) of the query: the chunks where a grade is at
stake. (A chunk that touches only read text derives 0 by construction; it is left out so that
the sample measures the rule where it decides.) The sheet shows the query, the document's
title and the chunk's text, never a derived grade; the reader grades each chunk 0-3 by the
suites' nugget rubric (docs/suite-format.md) applied to the chunk: how much of the answer its
text carries. `check` derives the grades with the shipped code and compares: exact and
within-one agreement per cell and overall, and, over every chunk of both chunkings, how many
chunks holding a complete grade-3 nugget derive 0 (the rule's floor).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once  # noqa: E402
from rageval_pipeline.core.suites.derived import EvidenceSet  # noqa: E402
from rageval_pipeline.core.suites.golden import load_suite  # noqa: E402
from rageval_pipeline.core.suites.loaders import suite_spans, suite_tables  # noqa: E402

RECORD = ROOT / "bench" / "derived_grades"
# Per round, recorded before its sheet was drawn or graded.
SEEDS = {1: 20261207, 2: 20261208, 3: 20261209, 4: 20261210, 5: 20261211}
# Chunks drawn per suite and chunking; round 5 (an independent reader) draws more.
PER_CELL = {1: 20, 2: 20, 3: 20, 4: 20, 5: 30}
SUITES = ("techdocs", "hotel")
CHUNKINGS = {
    "fixed-64": ChunkingConfig(strategy="fixed", size=64, overlap=0),
    "sentence-48": ChunkingConfig(strategy="sentence", size=48, overlap=0),
}


def at_stake(suite_name: str, chunking: ChunkingConfig) -> pd.DataFrame:
    """query_id, chunk_id of every chunk sharing a token with a nugget of the query, with the
    grade derived for it (`relevance`) and whether it holds a grade-3 nugget whole (`whole3`)."""
    suite = load_suite(ROOT / "data" / "suites" / suite_name)
    corpus = suite_tables(suite).corpus
    chunks = chunk_once(corpus, chunking)
    spans = suite_spans(suite)
    evidence = EvidenceSet.of(spans, corpus, chunks)
    nuggets = spans[spans["relevance"] >= 1][["query_id", "doc_id", "start", "end", "relevance"]]
    pairs = nuggets.merge(
        chunks[["chunk_id", "doc_id", "start", "end"]], on="doc_id", suffixes=("", "_chunk")
    )
    s_first, s_stop = evidence.tokens.ranges(pairs[["doc_id", "start", "end"]])
    extents = pairs[["doc_id", "start_chunk", "end_chunk"]]
    c_first, c_stop = evidence.tokens.ranges(extents.set_axis(["doc_id", "start", "end"], axis=1))
    shares = (np.minimum(s_stop, c_stop) - np.maximum(s_first, c_first)) > 0
    whole3 = (pairs["relevance"].to_numpy() == 3) & (c_first <= s_first) & (s_stop <= c_stop)
    touched = (
        pairs.assign(whole3=whole3)[shares]
        .groupby(["query_id", "chunk_id"], as_index=False)
        .agg(whole3=("whole3", "any"))
    )
    derived = evidence.qrels().rename(columns={"doc_id": "chunk_id"})
    grades = derived[["query_id", "chunk_id", "relevance"]]
    return touched.merge(grades, on=["query_id", "chunk_id"], how="left")


def earlier_pairs(round_: int) -> set[tuple[str, str, str, str]]:
    """(suite, chunking, query, chunk) of the sheets of the rounds before `round_`."""
    out = set()
    for before in range(1, round_):
        for line in (RECORD / f"round{before}" / "sheet.jsonl").read_text().splitlines():
            r = json.loads(line)
            out.add((r["suite"], r["chunking"], r["query_id"], r["chunk_id"]))
    return out


def draw(round_: int) -> None:
    rng = random.Random(SEEDS[round_])
    seen = earlier_pairs(round_)
    rows = []
    for suite_name in SUITES:
        suite = load_suite(ROOT / "data" / "suites" / suite_name)
        queries = {q.id: q.query for q in suite.queries}
        titles = {d.id: d.title for d in suite.documents}
        corpus = suite_tables(suite).corpus
        texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
        for name, chunking in CHUNKINGS.items():
            chunks = chunk_once(corpus, chunking).set_index("chunk_id")
            pool = at_stake(suite_name, chunking)
            keys = sorted(
                (q, c)
                for q, c in zip(pool["query_id"], pool["chunk_id"], strict=True)
                if (suite_name, name, q, c) not in seen
            )
            for query_id, chunk_id in rng.sample(keys, PER_CELL[round_]):
                chunk = chunks.loc[chunk_id]
                rows.append(
                    {
                        "suite": suite_name,
                        "chunking": name,
                        "query_id": query_id,
                        "query": queries[query_id],
                        "chunk_id": chunk_id,
                        "title": titles[chunk["doc_id"]],
                        "text": " ".join(
                            texts[chunk["doc_id"]][chunk["start"] : chunk["end"]].split()
                        ),
                    }
                )
    rng.shuffle(rows)
    folder = RECORD / f"round{round_}"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "sheet.jsonl").open("w", encoding="utf-8") as out:
        for order, row in enumerate(rows, 1):
            out.write(json.dumps({"order": order, **row}, ensure_ascii=False) + "\n")
    print(f"{folder / 'sheet.jsonl'}: {len(rows)} chunks, seed {SEEDS[round_]}")


def check(round_: int) -> int:
    path = RECORD / f"round{round_}" / "reader.jsonl"
    reader = [json.loads(line) for line in path.read_text().splitlines()]
    graded = {(r["suite"], r["chunking"], r["query_id"], r["chunk_id"]): r["grade"] for r in reader}
    lines = [
        "| suite | chunking | chunks | exact | within one | complete grade-3 nugget derived 0 |"
    ]
    lines.append("| --- | --- | ---: | ---: | ---: | ---: |")
    total = exact = near = floor = 0
    apart = []
    for suite_name in SUITES:
        # A query dropped from the suite since a round was drawn has nothing to derive.
        present = {q.id for q in load_suite(ROOT / "data" / "suites" / suite_name).queries}
        for name, chunking in CHUNKINGS.items():
            pool = at_stake(suite_name, chunking)
            derived = {
                (q, c): int(g) for q, c, g in pool[["query_id", "chunk_id", "relevance"]].values
            }
            mine = {
                (q, c): g
                for (s, n, q, c), g in graded.items()
                if (s, n) == (suite_name, name) and q in present
            }
            # A pair drawn in an earlier round whose chunk no longer touches a nugget (its text
            # was re-judged as read, no evidence) holds no decisive part: it derives 0.
            for key in mine.keys() - derived.keys():
                derived[key] = 0
            pairs = [(derived[k], g) for k, g in mine.items()]
            apart += [
                (suite_name, name, *k, derived[k], g) for k, g in mine.items() if derived[k] != g
            ]
            hits = sum(d == g for d, g in pairs)
            close = sum(abs(d - g) <= 1 for d, g in pairs)
            zero = int(((pool["whole3"]) & (pool["relevance"] == 0)).sum())
            holders = int(pool["whole3"].sum())
            lines.append(
                f"| {suite_name} | {name} | {len(pairs)} | {hits / len(pairs):.3f} | "
                f"{close / len(pairs):.3f} | {zero} of {holders} |"
            )
            total, exact, near, floor = total + len(pairs), exact + hits, near + close, floor + zero
    lines.append(f"| all | | {total} | {exact / total:.3f} | {near / total:.3f} | {floor} |")
    print("\n".join(lines))
    print("\nreader and rule apart (suite, chunking, query, chunk, derived, reader):")
    for row in apart:
        print("  " + " ".join(map(str, row)))
    ok = near / total >= 0.95 and floor == 0
    print(
        f"\nwithin one {near / total:.3f} (bound 0.95), floor violations {floor}: "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    command, round_ = sys.argv[1], int(sys.argv[2])
    sys.exit(draw(round_) or 0 if command == "draw" else check(round_))
