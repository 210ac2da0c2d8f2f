"""Reports that say why: the query floor named with the queries that lift it, no "add queries"
beside "resolved", one label per measure in the first screen, the details and the advice, the
paired interval's level from `alpha`, each advice line once."""

from __future__ import annotations

import math

from rageval_pipeline.core.gate import GatePolicy, RunSummary, baseline_from_summary, decide
from rageval_pipeline.core.report import build_report, to_markdown

RANK3 = 1 / math.log2(4)  # nDCG@10 of the one relevant document at rank 3


def summary(values: dict[str, dict[str, float]], system: str = "ours") -> RunSummary:
    names = sorted({m for v in values.values() for m in v})
    return RunSummary(
        dataset="synth",
        split="test",
        system=system,
        fingerprint="cfg",
        run_id=f"run-{system}",
        created_at="2026-02-01T10:00:00+00:00",
        measures={m: sum(v[m] for v in values.values()) / len(values) for m in names},
        per_query=values,
        n_queries=len(values),
    )


def report(run: RunSummary, base: RunSummary, **rules: object) -> str:
    rules = {"statistics": {"resamples": 2000}} | rules
    policy = GatePolicy.model_validate({"datasets": {"default": rules}})
    baselines = {("synth", run.system): baseline_from_summary(base)}
    verdict = decide([run], baselines, policy)
    return to_markdown(build_report(verdict, [run], baselines))


def next_steps(markdown: str) -> list[str]:
    part = markdown.split("## What to do next", 1)[1].split("## Details", 1)[0]
    return [line for line in part.splitlines() if line.startswith("- ")]


def test_under_the_query_floor_the_report_says_the_floor_decided_and_how_many_lift_it():
    # 19 queries, one improves from rank 3 to rank 1: nothing got worse, yet below 20 paired
    # queries only an unmoved system passes.
    base = {f"q{i:02d}": {"nDCG@10": RANK3 if i == 0 else 1.0} for i in range(19)}
    run = {q: {"nDCG@10": 1.0} for q in base}
    md = report(summary(run), summary(base))
    assert "the query floor decided: below 20 paired queries" in md
    assert "1 more query lifts the floor" in md
    assert "the interval reaches past the band" not in md
    row = next(line for line in md.splitlines() if line.startswith("| synth/ours | nDCG@10 |"))
    assert "the 20-query floor decided: add 1 query" in row
    [step] = [s for s in next_steps(md) if "floor" in s]
    assert "add 1 query to the suite to lift it" in step


def test_a_resolved_measure_is_never_told_to_add_queries():
    # 200 queries, 20 of them halved: a drop of exactly the band, measured finely enough to
    # resolve it, but not finely enough to tell it from just inside or just beyond.
    base = {f"q{i:03d}": {"nDCG@10": 1.0} for i in range(200)}
    run = {q: {"nDCG@10": 0.5 if i % 10 == 0 else 1.0} for i, q in enumerate(base)}
    md = report(summary(run), summary(base))
    row = next(line for line in md.splitlines() if line.startswith("| synth/ours | nDCG@10 |"))
    assert row.rstrip(" |").endswith("resolved") and "INCONCLUSIVE" in md
    steps = next_steps(md)
    assert any("resolves the band on nDCG@10" in s for s in steps)
    assert not any("add queries" in s or "human-judged queries" in s for s in steps)


def test_a_measure_has_one_label_and_each_advice_line_appears_once():
    # RR(rel=2) and nDCG@10 both compared, both inconclusive on 12 queries.
    base = {f"q{i:02d}": {"nDCG@10": 1.0, "RR(rel=2)": 1.0} for i in range(12)}
    run = {
        q: {"nDCG@10": RANK3 if i < 3 else 1.0, "RR(rel=2)": 0.5 if i < 3 else 1.0}
        for i, q in enumerate(base)
    }
    md = report(summary(run), summary(base), compare=["nDCG@10", "RR(rel=2)"])
    rows = [line for line in md.splitlines() if line.startswith("| RR(rel=2) | 0.")]
    assert len(rows) == 2 and all("INCONCLUSIVE" in line for line in rows), rows
    moved = [line for line in md.splitlines() if line.startswith("| synth/ours | RR(rel=2) |")]
    assert any(line.rstrip(" |").endswith("INCONCLUSIVE") for line in moved), moved
    assert "No measure moved beyond tolerance" not in md
    steps = next_steps(md)
    assert len(steps) == len(set(steps)) and sum("RR(rel=2)" in s for s in steps) == 1


def test_the_paired_interval_level_follows_alpha():
    base = {f"q{i:02d}": {"nDCG@10": 1.0} for i in range(30)}
    run = {q: {"nDCG@10": RANK3 if i < 6 else 1.0} for i, q in enumerate(base)}
    md = report(summary(run), summary(base), statistics={"alpha": 0.5, "resamples": 2000})
    assert "Delta [50% CI]" in md and "50% CI [" in md
    # Only the run mean's own interval (computed at 95% with every run) keeps its 95%.
    assert "Delta [95% CI]" not in md and "95% CI [" not in md
