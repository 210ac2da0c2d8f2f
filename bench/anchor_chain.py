"""How many steps of -0.5 x band a chain of baseline updates survives, without and with the
anchor (core/gate/anchoring.py), measured by running the shipped gate and `baseline update`.

Each world is a suite of n queries resampled from nfcorpus's committed bm25 baseline (per-query
nDCG@10, data/baselines/nfcorpus/bm25.json). Each step is a tweak: the previous run plus the
real per-query differences of hybrid vs bm25 on nfcorpus (resampled, centred, scaled by
`--scale`), then scaled so the suite's mean is exactly (1 - 0.025 k) of the first baseline's: a
true loss of half the default band (5%) per step. Each step's run is judged by
`core.gate.decide` against the committed baselines; when it passes, it is recorded by
`core.gate.baselines.promote` (the code `rageval baseline update` runs), so the next step is
judged against it. A chain stops at the first blocked step.

    PYTHONPATH=$PWD nice .venv/bin/python bench/anchor_chain.py [--worlds 200] [--queries 100]

"before" is the gate without the anchor (`anchor.factor` so wide no chain reaches it), "after"
the default policy (the anchor's cumulative band is 2 x the band). The bootstrap's resamples are
lowered to 2,000 to keep the run short (they set the interval's Monte Carlo noise, not its
width).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from rageval_pipeline.core.gate import GatePolicy, RunSummary, decide, load_baselines
from rageval_pipeline.core.gate.baselines import promote

ROOT = Path(__file__).resolve().parent.parent
STEPS = 6
STEP = 0.025  # half the default band (5%) of the first baseline's mean, per step


def _per_query(system: str) -> dict[str, float]:
    data = json.loads((ROOT / "data/baselines/nfcorpus" / f"{system}.json").read_text())
    return {q: v["nDCG@10"] for q, v in data["per_query"].items()}


def _summary(values: np.ndarray, step: int) -> RunSummary:
    per_query = {f"q{i:03d}": {"nDCG@10": round(float(v), 6)} for i, v in enumerate(values)}
    return RunSummary(
        dataset="d",
        split="test",
        system="s",
        fingerprint=f"f{step}",
        run_id=f"run-{step}",
        created_at=f"2026-01-{step + 1:02d}T12:00:00+00:00",
        measures={"nDCG@10": float(np.mean([q["nDCG@10"] for q in per_query.values()]))},
        per_query=per_query,
        n_queries=len(values),
        suite="s",
    )


def chain(rng: np.random.Generator, policy: GatePolicy, args, base, diffs) -> int:
    """Steps passed before the first blocked one (STEPS: none blocked)."""
    idx = rng.choice(len(base), args.queries)
    first = base[idx]
    target = first.mean()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        promote([_summary(first, 0)], root, policy)
        current = first
        for step in range(1, STEPS + 1):
            d = diffs[rng.choice(len(diffs), args.queries)] * args.scale
            moved = np.clip(current + d - d.mean(), 0, 1)
            moved *= target * (1 - STEP * step) / moved.mean()
            run = _summary(np.clip(moved, 0, 1), step)
            if not decide([run], load_baselines(root), policy).passed:
                return step - 1
            promote([run], root, policy)
            current = moved
    return STEPS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--scale", type=float, default=0.15, help="of the real differences")
    args = parser.parse_args()
    bm25, hybrid = _per_query("bm25"), _per_query("hybrid")
    queries = sorted(bm25)
    base = np.array([bm25[q] for q in queries])
    diffs = np.array([hybrid[q] - bm25[q] for q in queries])
    fast = {"statistics": {"resamples": 2000}}
    policies = {
        "before (no anchor)": GatePolicy.model_validate(
            {"datasets": {"default": {**fast, "anchor": {"factor": 100}}}}
        ),
        "after (anchor, 2x band)": GatePolicy.model_validate({"datasets": {"default": fast}}),
    }
    print(
        f"{args.worlds} worlds, {args.queries} queries, steps of -{STEP:.1%} (0.5 x band), "
        f"tweak = {args.scale:g} x real hybrid-bm25 differences"
    )
    print("| policy | mean steps survived | P(4 steps, -10%, pass) | P(all 6 pass) | by steps |")
    print("| --- | --- | --- | --- | --- |")
    for name, policy in policies.items():
        rng = np.random.default_rng(42)
        start = time.time()
        survived = np.array([chain(rng, policy, args, base, diffs) for _ in range(args.worlds)])
        counts = np.bincount(survived, minlength=STEPS + 1)
        print(
            f"| {name} | {survived.mean():.2f} | {(survived >= 4).mean():.3f} | "
            f"{(survived >= STEPS).mean():.3f} | {counts.tolist()} | "
            f"({time.time() - start:.0f} s)"
        )


if __name__ == "__main__":
    main()
