"""The breakage guard's error rates on real per-query nDCG@10 of nfcorpus (test, 323 queries),
and with `--rule` the whole per-run decision (the interval rule on the primary measure and the
guard) in worlds shifted to a known true effect.

Per-query values come from bm25s runs of the corpus (PyStemmer English, English stopwords,
title + text; nDCG@10 by pytrec_eval): the reference configuration (k1 1.5, b 0.75), five
configuration tweaks, and two system swaps (no stemming or stopwords; titles only). Suites of n
queries are resampled from the paired values, and the shipped `breakage.broken_queries` decides
each under the default policy. False alarms: the guard blocking a tweak or a swap. Catches:
the k1 1.2 tweak with a share of all queries sent to 0 ("a few queries break").

`--rule`: each world's run values are the change's minus its population mean delta plus the
true effect (a multiple of the band, 5% of the population's mean), so the shape of the paired
differences is the real one; suites of n queries are resampled, and the shipped
`decision.tests` (1,000 resamples), `decision.judge` and `breakage.broken_queries` decide.

    PYTHONPATH=$PWD nice .venv/bin/python bench/breakage_guard.py [--archive nfcorpus.zip]
    PYTHONPATH=$PWD nice .venv/bin/python bench/breakage_guard.py --rule [--worlds 400]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import bm25s
import numpy as np
import pytrec_eval
import Stemmer

from bench.nfcorpus import read_nfcorpus
from rageval_pipeline.core.gate.breakage import broken_queries
from rageval_pipeline.core.gate.decision import Statistics, judge, tests
from rageval_pipeline.core.gate.policy import Breakage

ARCHIVE = Path("/work/shared/data/beir/nfcorpus.zip")
SIZES = (20, 50, 100, 300)
TWEAKS = {"k1 1.2": (1.2, 0.75), "k1 0.9, b 0.4": (0.9, 0.4), "k1 2.0": (2.0, 0.75)}
TWEAKS |= {"b 0.9": (1.5, 0.9), "b 0.5": (1.5, 0.5)}
BREAK_SHARES = (0.034, 0.08)


def _ndcg(qrels, qids, ids, ranked) -> np.ndarray:
    docs, scores = ranked
    run = {
        q: {ids[d]: float(s) for d, s in zip(docs[i], scores[i], strict=True)}
        for i, q in enumerate(qids)
    }
    found = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return np.array([found[q]["ndcg_cut_10"] for q in qids])


def measured(archive: Path) -> tuple[list[str], dict[str, np.ndarray]]:
    corpus, queries, qrels = read_nfcorpus(archive)
    qids = list(queries["query_id"])
    ids = list(corpus["doc_id"])
    texts = list(corpus["title"].fillna("") + " " + corpus["text"].fillna(""))
    stem = Stemmer.Stemmer("english")

    def tok(strings, plain=False):
        kwargs = {} if plain else {"stopwords": "en", "stemmer": stem}
        return bm25s.tokenize(strings, show_progress=False, **kwargs)

    def search(docs, asked, k1=1.5, b=0.75):
        index = bm25s.BM25(k1=k1, b=b)
        index.index(docs, show_progress=False)
        return _ndcg(qrels, qids, ids, index.retrieve(asked, k=100, show_progress=False))

    asked, docs = tok(list(queries["text"])), tok(texts)
    values = {"reference": search(docs, asked)}
    values |= {name: search(docs, asked, k1, b) for name, (k1, b) in TWEAKS.items()}
    values["swap: no stemming or stopwords"] = search(
        tok(texts, plain=True), tok(list(queries["text"]), plain=True)
    )
    values["swap: titles only"] = search(tok(list(corpus["title"].fillna(""))), asked)
    return qids, values


def blocked(base: np.ndarray, run: np.ndarray, n: int, worlds: int, seed: int, brk=0.0) -> float:
    rng, guard, hits = np.random.default_rng(seed), Breakage(), 0
    for _ in range(worlds):
        idx = rng.integers(0, len(base), n)
        value = run[idx].copy()
        value[rng.random(n) < brk] = 0.0
        hits += broken_queries(
            list(zip(map(str, range(n)), base[idx], value, strict=True)), guard
        ).blocks
    return hits / worlds


RULE_SHAPES = {
    "tweak k1 1.2": ("k1 1.2", 0.0),
    "tweak k1 0.9, b 0.4": ("k1 0.9, b 0.4", 0.0),
    "swap: no stemming or stopwords": ("swap: no stemming or stopwords", 0.0),
    "swap: titles only": ("swap: titles only", 0.0),
    "k1 1.2, 3.4% of queries to 0": ("k1 1.2", 0.034),
}
EFFECTS = (-1, -2, 0)
MODES = ("block", "block_likely")


def passes(base, run, brk, effect, n, mode, worlds) -> float:
    """The share of suites of n queries whose run passes (the rule and the guard)."""
    rng, guard = np.random.default_rng(n), Breakage()
    stats = Statistics(resamples=1000, inconclusive=mode)
    passed = 0
    for _ in range(worlds):
        value = run.copy()
        value[rng.random(len(value)) < brk] = 0.0
        value += effect * 0.05 * base.mean() - (value - base).mean()
        idx = rng.integers(0, len(base), n)
        b, v = base[idx], value[idx]
        test = tests({"m": (b, v)}, stats)["m"]
        verdict = judge(True, test.delta, test, 0.05 * b.mean(), stats)
        broke = broken_queries(list(zip(map(str, range(n)), b, v, strict=True)), guard).blocks
        passed += not (verdict.blocks or broke)
    return passed / worlds


def rule_table(base: np.ndarray, values: dict[str, np.ndarray], worlds: int) -> None:
    print("| world | true change | mode | " + " | ".join(f"n = {n}" for n in SIZES[:3]) + " |")
    print("|---|---|---|" + "---|" * 3)
    for name, (shape, brk) in RULE_SHAPES.items():
        for effect in EFFECTS:
            for mode in MODES:
                rates = [
                    passes(base, values[shape], brk, effect, n, mode, worlds) for n in SIZES[:3]
                ]
                cells = " | ".join(f"{r:.1%}" for r in rates)
                print(f"| {name} | {effect:+d} x band | {mode} | {cells} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE)
    parser.add_argument("--worlds", type=int, default=2000)
    parser.add_argument("--rule", action="store_true", help="the PASS rate of the whole rule")
    args = parser.parse_args()
    qids, values = measured(args.archive)
    base = values.pop("reference")
    if args.rule:
        rule_table(base, values, args.worlds)
        return
    print(f"{len(qids)} queries, nDCG@10 {base.mean():.4f}, {np.mean(base >= 0.5):.1%} at >= 0.5")
    print("| change | paired SD | " + " | ".join(f"n = {n}" for n in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    for name, run in values.items():
        rates = [blocked(base, run, n, args.worlds, seed=n) for n in SIZES]
        sd = np.std(run - base, ddof=1)
        print(f"| {name} | {sd:.3f} | " + " | ".join(f"{r:.1%}" for r in rates) + " |")
    for share in BREAK_SHARES:
        rates = [blocked(base, values["k1 1.2"], n, args.worlds, n, share) for n in SIZES]
        print(
            f"| k1 1.2, {share:.1%} of queries to 0 | – | "
            + " | ".join(f"{r:.1%}" for r in rates)
            + " |"
        )


if __name__ == "__main__":
    main()
