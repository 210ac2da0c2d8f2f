"""Honest measures for a team's own passages: R@k, nDCG@k, AP, Rprec (and F1@k), whose ideal
list would hold only the passages the system retrieved, are not comparable: left out of the
verdict and the side-by-side table; the verdict is decided on the evidence budgets and the first
screen says so."""

from __future__ import annotations

import numpy as np

from rageval_pipeline.core import report
from rageval_pipeline.core.gate import GatePolicy, RunSummary, decide
from rageval_pipeline.core.gate.baselines import baseline_from_summary
from rageval_pipeline.core.gate.comparable import own_passages

QUERIES = 40
RNG = np.random.default_rng(4)
EVIDENCE = RNG.uniform(0.5, 0.9, QUERIES)
NDCG = RNG.uniform(0.5, 0.9, QUERIES)


def _summary(system: str, evidence: np.ndarray, *, own: bool, run_id: str) -> RunSummary:
    budgets = {f"EvidenceRecall@{b}t": evidence for b in (512, 1024, 2048)}
    budgets |= {f"TokenPrecision@{b}t": evidence * 0.5 for b in (512, 1024, 2048)}
    # An own-passage system's R@100 is 1 on every query (its ideal list is what it retrieved),
    # and its nDCG@10 does not see the loss either.
    values = {"R@100": np.ones(QUERIES) if own else NDCG, "nDCG@10": NDCG, **budgets}
    per_query = {
        f"q{i:02d}": {m: round(float(v[i]), 6) for m, v in values.items()} for i in range(QUERIES)
    }
    unit = "guide:span:{}-{}" if own else "guide:chunk:{}"
    return RunSummary(
        dataset="own",
        split="test",
        system=system,
        fingerprint=system,
        run_id=run_id,
        created_at="2026-03-01T10:00:00+00:00",
        measures={m: float(np.mean([q[m] for q in per_query.values()])) for m in values},
        per_query=per_query,
        n_queries=QUERIES,
        level="chunk",
        top={f"q{i:02d}": [{"id": unit.format(i, i + 50), "grade": 1}] for i in range(QUERIES)},
    )


def test_own_passages_are_told_by_their_listed_ids():
    assert own_passages(_summary("ours", EVIDENCE, own=True, run_id="a"))
    assert not own_passages(_summary("bm25", EVIDENCE, own=False, run_id="b"))
    assert not own_passages(None)


def test_the_verdict_of_an_own_passage_system_is_decided_on_the_evidence_budgets():
    baseline = baseline_from_summary(_summary("ours", EVIDENCE, own=True, run_id="base"))
    broken = _summary("ours", EVIDENCE * 0.6, own=True, run_id="broken")
    bm25 = _summary("bm25", EVIDENCE, own=False, run_id="bm25")
    baselines = {("own", "ours"): baseline, ("own", "bm25"): baseline_from_summary(bm25)}
    verdict = decide([broken, bm25], baselines, GatePolicy())
    assert not verdict.passed
    ours = [c for c in verdict.checks if c.system == "ours"]
    # The primary measure (evidence at the first budget) decides; the other budgets are watched.
    compared = {c.measure for c in ours if c.kind == "baseline"}
    assert compared == {"EvidenceRecall@512t"}
    watched = {c.measure for c in ours if c.kind == "watched"}
    assert (
        watched
        >= {f"{f}@{b}t" for f in ("EvidenceRecall", "TokenPrecision") for b in (512, 1024, 2048)}
        - compared
    )
    failed = {c.measure for c in ours if c.kind == "baseline" and not c.passed}
    assert failed == {"EvidenceRecall@512t"}
    [r100] = [c for c in ours if c.measure == "R@100"]
    assert r100.kind == "value" and "not comparable: it returns its own passages" in r100.message
    change = next(c for c in verdict.changes if c.system == "ours")
    assert "it returns its own passages" in change.note and "EvidenceRecall" in change.note

    # The first screen says so; the side-by-side table does not put R@100 = 1.0000 beside bm25.
    full = report.build_report(verdict, [broken, bm25], baselines)
    markdown = report.to_markdown(full)
    first_screen = markdown.split("## What this suite can tell")[0]
    assert "ours: it returns its own passages (text or offsets)" in first_screen
    [row] = [r for r in full.rows if r.measure == "R@100"]
    cells = dict(zip(full.columns, row.cells, strict=True))
    assert cells["own/ours"].not_comparable and cells["own/bm25"].value is not None
    side_by_side = [line for line in markdown.splitlines() if "n/c (own passages)" in line]
    assert [line.split(" |")[0] for line in side_by_side] == ["| R@100", "| nDCG@10"]
    assert "1.0000" not in side_by_side[0]


def test_without_a_baseline_its_ideal_bound_thresholds_are_reported_not_applied():
    policy = GatePolicy.model_validate({"datasets": {"default": {"thresholds": {"R@100": 0.9}}}})
    bm25 = _summary("bm25", EVIDENCE, own=False, run_id="bm25")
    low = bm25.model_copy(update={"measures": {**bm25.measures, "R@100": 0.5}, "system": "bm25"})
    assert not decide([low], {}, policy).passed  # the floor holds for a built-in
    ours = _summary("ours", EVIDENCE, own=True, run_id="ours")
    ours = ours.model_copy(update={"measures": {**ours.measures, "R@100": 0.5}})
    verdict = decide([ours], {}, policy)
    assert not [c for c in verdict.checks if c.kind == "threshold"]
    assert "it returns its own passages" in verdict.changes[0].note
