"""The gate's `statistics.rule: ppi`: a drop that 60 human-judged queries cannot establish is
established with 400 LLM-judged ones corrected on them; without LLM values it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rageval_pipeline.core.gate import (
    GatePolicy,
    RunSummary,
    Verdict,
    baseline_from_summary,
    decide,
    load_baseline,
    write_baseline,
)
from rageval_pipeline.core.statistics.ppi import ppi_deltas
from rageval_pipeline.core.statistics.sampling import HumanSample, draw_sample

POPULATION, HUMAN = 400, 60


def _world() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, HumanSample]:
    """True nDCG@10 of a baseline and of a run about 0.08 worse (beyond a 5% band, noisy per
    query), and a judge that overrates every query by 0.1 give or take 0.05."""
    rng = np.random.default_rng(26)
    base = rng.uniform(0.4, 1.0, POPULATION)
    run = np.clip(base - 0.08 + rng.normal(0, 0.3, POPULATION), 0, 1)
    base_llm, run_llm = (
        np.clip(v + 0.1 + rng.normal(0, 0.05, POPULATION), 0, 1) for v in (base, run)
    )
    sample = draw_sample([f"q{i:03d}" for i in range(POPULATION)], HUMAN)
    return base, run, base_llm, run_llm, sample


def _summary(truth: np.ndarray, llm: np.ndarray | None, sample: HumanSample) -> RunSummary:
    """Human-judged values on the sample; LLM-judged ones on every query (when given)."""
    drawn = sample.drawn()
    per_query = {q: {"nDCG@10": float(truth[int(q[1:])])} for q in drawn}
    llm_values = (
        {} if llm is None else {q: {"nDCG@10": float(llm[int(q[1:])])} for q in sample.frame}
    )
    return RunSummary(
        dataset="synth",
        split="test",
        system="ours",
        fingerprint="cfg",
        run_id="run",
        created_at="2026-11-26T03:00:00+00:00",
        measures={"nDCG@10": float(np.mean([v["nDCG@10"] for v in per_query.values()]))},
        per_query=per_query,
        n_queries=len(per_query),
        sample_per_query={} if llm is None else per_query,
        llm_per_query=llm_values,
        human_sample=None if llm is None else sample,
    )


def _verdict(run: RunSummary, base: RunSummary, rule: str) -> Verdict:
    policy = GatePolicy.model_validate(
        {"datasets": {"default": {"statistics": {"rule": rule}, "spike": {"share": 1.0}}}}
    )
    return decide([run], {("synth", "ours"): baseline_from_summary(base)}, policy)


def _ndcg(verdict: Verdict):
    [check] = [c for c in verdict.checks if c.kind == "baseline" and c.measure == "nDCG@10"]
    return check


def test_ppi_establishes_the_drop_that_the_human_sample_alone_cannot():
    base, run, base_llm, run_llm, sample = _world()
    run_summary, base_summary = _summary(run, run_llm, sample), _summary(base, base_llm, sample)

    human_only = _ndcg(_verdict(run_summary, base_summary, "interval"))
    assert human_only.inconclusive and human_only.paired.n == HUMAN

    verdict = _verdict(run_summary, base_summary, "ppi")
    check = _ndcg(verdict)
    assert not verdict.passed and check.blocking and check.category == "ranking_shift"
    assert "PPI++ paired delta" in check.message and f"over {POPULATION} queries" in check.message
    expected = ppi_deltas(
        (base_summary.per_query, run_summary.per_query),
        (base_summary.llm_per_query, run_summary.llm_per_query),
        sample,
        ["nDCG@10"],
    )["nDCG@10"]
    assert (check.paired.delta, check.paired.ci_low, check.paired.ci_high) == pytest.approx(
        (expected.estimate, expected.ci_low, expected.ci_high), abs=1e-12
    )
    band = 0.05 * base_summary.measures["nDCG@10"]
    assert check.paired.ci_high < -band < human_only.paired.ci_high
    assert check.paired.mde < human_only.paired.mde


def test_without_llm_values_the_ppi_rule_refuses_in_one_blocking_line():
    base, run, base_llm, run_llm, sample = _world()
    verdict = _verdict(_summary(run, None, sample), _summary(base, base_llm, sample), "ppi")
    [refused] = [c for c in verdict.checks if c.kind == "baseline"]
    assert not verdict.passed and refused.blocking and refused.measure is None
    assert "refused: statistics.rule is ppi" in refused.message and "\n" not in refused.message

    other = draw_sample(sample.frame, HUMAN + 1)
    verdict = _verdict(_summary(run, run_llm, sample), _summary(base, base_llm, other), "ppi")
    [refused] = [c for c in verdict.checks if c.kind == "baseline"]
    assert "same population and human sample" in refused.message


def test_a_drawn_query_without_a_human_value_is_refused_by_the_gate_not_scored_zero():
    """`check_drawn` runs again in the gate, whoever built the summaries (issue 32)."""
    base, run, base_llm, run_llm, sample = _world()
    missing = sample.drawn()[0]
    short = _summary(run, run_llm, sample)
    short = short.model_copy(
        update={"sample_per_query": {q: v for q, v in short.per_query.items() if q != missing}}
    )
    verdict = _verdict(short, _summary(base, base_llm, sample), "ppi")
    [refused] = [c for c in verdict.checks if c.kind == "baseline"]
    assert not verdict.passed and refused.blocking and refused.paired is None
    assert f"drawn but not judged: {missing}" in refused.message and "\n" not in refused.message


def test_baselines_keep_the_ppi_fields_and_only_when_they_are_set(tmp_path):
    base, _, base_llm, _, sample = _world()
    with_ppi = baseline_from_summary(_summary(base, base_llm, sample))
    write_baseline(with_ppi, tmp_path / "ppi.json")
    loaded = load_baseline(tmp_path / "ppi.json")
    assert loaded.human_sample == sample and set(loaded.llm_per_query) == set(sample.frame)
    without = baseline_from_summary(_summary(base, None, sample))
    write_baseline(without, tmp_path / "human.json")
    assert not {"llm_per_query", "human_sample"} & set(
        json.loads((tmp_path / "human.json").read_text())
    )
