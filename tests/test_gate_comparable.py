"""The gate compares what is comparable (issue 33): a changed chunking or scoring level is judged
on the evidence measures at token budgets, never on per-chunk ranking measures."""

from __future__ import annotations

from pathlib import Path

from rageval_pipeline.core.gate import (
    GatePolicy,
    RunSummary,
    Verdict,
    baseline_from_summary,
    decide,
)
from rageval_pipeline.core.report import build_report, to_markdown

BUDGETED = ("EvidenceRecall@512t", "TokenPrecision@512t")


def _per_query(values: dict[str, float], shift: dict[str, float], n: int = 40) -> dict:
    return {
        f"q{i:02d}": {m: v + shift.get(m, 0.0) + 0.01 * (i % 5) for m, v in values.items()}
        for i in range(n)
    }


def summary(
    values: dict[str, float],
    *,
    shift: dict[str, float] | None = None,
    size: int | None = None,
    level: str = "chunk",
) -> RunSummary:
    """bm25 on techdocs, chunked by the reference sections (`size` None) or fixed windows."""
    per_query = _per_query(values, shift or {})
    means = {m: sum(q[m] for q in per_query.values()) / len(per_query) for m in values}
    chunking = {"strategy": "reference"} if size is None else {"strategy": "fixed", "size": size}
    return RunSummary(
        dataset="techdocs",
        split="test",
        system="bm25",
        fingerprint=f"cfg-{size}",
        run_id="run-bm25",
        created_at="2026-11-28T10:00:00+00:00",
        measures=means,
        per_query=per_query,
        n_queries=len(per_query),
        level=level,
        config={"retriever": "bm25", "chunking": chunking},
    )


VALUES = {"nDCG@10": 0.52, "RR(rel=2)": 0.5, "Tokens@10": 508.0}
VALUES |= {"EvidenceRecall@512t": 0.40, "TokenPrecision@512t": 0.30}
POLICY = GatePolicy.model_validate(
    {"datasets": {"techdocs": {"compare": ["RR(rel=2)", "nDCG@10"], "budgets": [512]}}}
)


def judge(run: RunSummary, base: RunSummary, policy: GatePolicy = POLICY) -> Verdict:
    return decide([run], {("techdocs", "bm25"): baseline_from_summary(base)}, policy)


def checks_of(verdict: Verdict, measure: str) -> list[str]:
    return [c.kind for c in verdict.checks if c.measure == measure]


def test_a_chunking_change_is_judged_on_budget_measures_not_per_chunk_ranking():
    base = summary(VALUES)
    # Larger windows: nDCG@10 far up and 8x the tokens, the same evidence at 512 tokens.
    bigger = {"nDCG@10": 0.19, "RR(rel=2)": 0.2, "Tokens@10": 3600.0}
    verdict = judge(summary(VALUES, shift=bigger, size=512), base)
    assert verdict.passed and not verdict.improvements
    for measure in ("nDCG@10", "RR(rel=2)"):
        [kind] = checks_of(verdict, measure)
        assert kind == "value"  # reported, never compared, improved or failed
    value = next(c for c in verdict.checks if c.measure == "nDCG@10")
    assert "baseline 0.5400; not compared: the chunking changed" in value.message
    assert {c.measure for c in verdict.checks if c.kind == "baseline"} == set(BUDGETED)
    assert checks_of(verdict, "Tokens@10") == ["watched"]
    [change] = verdict.changes
    assert change.level == "chunk" and "decided on EvidenceRecall and TokenPrecision" in (
        change.note or ""
    )
    # A drop of evidence at 512 tokens fails, however much nDCG@10 rose.
    worse = summary(VALUES, shift=bigger | {"EvidenceRecall@512t": -0.2}, size=512)
    failed = judge(worse, base)
    assert [(c.measure, c.category) for c in failed.failures] == [
        ("EvidenceRecall@512t", "recall_drop")
    ]
    # The first screen says what the verdict was decided on, and each run's level.
    baselines = {("techdocs", "bm25"): baseline_from_summary(base)}
    text = to_markdown(build_report(failed, [worse], baselines))
    screen = text.split("## Measures that moved")[0]
    assert "per-chunk ranking measures (nDCG, RR, AP, P, R) count other units" in screen
    assert "Scored techdocs/bm25 at chunk level." in screen


def test_limits_on_per_chunk_ranking_measures_are_reported_not_applied_under_a_new_chunking():
    # A floor and a target set for sections: nDCG@10 0.30 and RR 0.30 over 512-token windows
    # would fail the floor and warn the target, in units they were not set for.
    limits = {"thresholds": {"nDCG@10": 0.45, "EvidenceRecall@512t": 0.2}}
    policy = GatePolicy.model_validate(
        {
            "datasets": {
                "techdocs": POLICY.datasets["techdocs"].model_dump()
                | limits
                | {"targets": {"RR(rel=2)": 0.45}}
            }
        }
    )
    lower = {"nDCG@10": -0.22, "RR(rel=2)": -0.2}
    verdict = judge(summary(VALUES, shift=lower, size=512), summary(VALUES), policy)
    assert verdict.passed and not verdict.warnings
    assert checks_of(verdict, "nDCG@10") == ["value"]
    assert checks_of(verdict, "RR(rel=2)") == ["value"]
    # A limit on a budget measure still applies; with the reference chunking every limit does.
    assert "threshold" in checks_of(verdict, "EvidenceRecall@512t")
    same = judge(summary(VALUES, shift=lower), summary(VALUES), policy)
    assert "threshold" in checks_of(same, "nDCG@10") and not same.passed


def test_an_unchanged_chunking_keeps_every_comparison():
    base = summary(VALUES)
    verdict = judge(summary(VALUES, shift={"nDCG@10": 0.19, "RR(rel=2)": 0.2}), base)
    assert {c.measure for c in verdict.improvements} == {"nDCG@10", "RR(rel=2)"}
    assert verdict.changes[0].note is None


def test_a_chunking_change_without_budget_measures_in_the_baseline_compares_nothing():
    old = {m: v for m, v in VALUES.items() if m not in BUDGETED}
    verdict = judge(summary(VALUES, shift={"nDCG@10": -0.3}, size=512), summary(old))
    assert verdict.passed  # nDCG@10 fell, but it counts other units
    assert not [c for c in verdict.checks if c.kind == "baseline"]
    config = next(c for c in verdict.checks if c.kind == "configuration")
    assert not config.passed and not config.blocking
    assert "only absolute limits apply until the baseline is re-recorded" in config.message


def test_a_level_change_is_judged_on_budget_measures_or_refused_without_them():
    base = summary(VALUES, level="document")
    verdict = judge(summary(VALUES, shift={"nDCG@10": 0.3}), base)
    assert verdict.passed and not [c for c in verdict.checks if c.kind == "level"]
    assert "the scoring level changed (document -> chunk)" in (verdict.changes[0].note or "")
    assert {c.measure for c in verdict.checks if c.kind == "baseline"} == set(BUDGETED)
    old = {m: v for m, v in VALUES.items() if m not in BUDGETED}
    refused = judge(summary(VALUES), summary(old, level="document"))
    [level] = [c for c in refused.checks if c.kind == "level"]
    assert level.blocking and not refused.passed


def test_a_run_scored_by_document_keeps_its_comparisons_under_a_new_chunking():
    # Each document ranks by its best chunk, whatever the chunks: nDCG@10 still compares.
    base = summary(VALUES, level="document")
    verdict = judge(summary(VALUES, shift={"nDCG@10": -0.3}, size=512, level="document"), base)
    assert [c.measure for c in verdict.failures if c.kind == "baseline"] == ["nDCG@10"]
    assert verdict.changes[0].note is None


def test_a_stored_baseline_without_budgets_is_replaced_by_its_configuration_re_run():
    """A built-in system's baseline recorded before the budget measures: the job re-ran its
    configuration on the same queries (`Rerun`), and the run is judged against that at each
    budget, both configurations side by side on the first screen."""
    from rageval_pipeline.core.gate import Rerun
    from rageval_pipeline.core.report import short_summary

    stored = summary({m: v for m, v in VALUES.items() if m not in BUDGETED})
    again = summary(VALUES)  # the reference configuration, measured in this run
    rerun = Rerun(reason="the chunking changed", measures=again.measures, per_query=again.per_query)
    bigger = {"nDCG@10": 0.19, "Tokens@10": 3600.0, "EvidenceRecall@512t": -0.2}
    run = summary(VALUES, shift=bigger, size=512).model_copy(update={"baseline_rerun": rerun})
    verdict = judge(run, stored)
    assert [(c.measure, c.category) for c in verdict.failures] == [
        ("EvidenceRecall@512t", "recall_drop")
    ]
    [change] = verdict.changes
    assert change.compared_with == "rerun" and change.rerun_reason == "the chunking changed"
    assert checks_of(verdict, "nDCG@10") == ["value"]
    baselines = {("techdocs", "bm25"): baseline_from_summary(stored)}
    screen = to_markdown(build_report(verdict, [run], baselines)).split("## What this suite")[0]
    assert (
        "| techdocs | bm25 | FAIL (recall_drop) | baseline configuration re-run in this run |"
        in screen
    )
    assert "the chunking changed since the stored baseline of 2026-11-28" in screen
    assert (
        "| techdocs/bm25 | 512 tokens | 0.4200 → 0.2200 FAIL recall_drop | 0.3200 → 0.3200 PASS |"
        in screen
    )
    line = short_summary(verdict, Path("r")).splitlines()[1]
    assert line.endswith(", chunk level, against the baseline configuration re-run in this run")
