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


def _verdict(run: RunSummary, base: RunSummary, rule: str, **rules: object) -> Verdict:
    rules = {"statistics": {"rule": rule}, "spike": {"share": 1.0}} | rules
    policy = GatePolicy.model_validate({"datasets": {"default": rules}})
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


def test_the_first_screen_shows_the_human_only_and_ppi_intervals_with_the_effective_n():
    from ppi_py import classical_mean_ci, ppi_mean_ci

    from rageval_pipeline.core.report import to_html, to_markdown

    base, run, base_llm, run_llm, sample = _world()
    run_summary, base_summary = _summary(run, run_llm, sample), _summary(base, base_llm, sample)
    verdict = _verdict(run_summary, base_summary, "ppi")
    test = _ndcg(verdict).paired

    # Against ppi_py on the per-query differences: the human-only interval is its classical
    # one on the sample, the effective n the sample size scaled by the squared width ratio.
    drawn = [int(q[1:]) for q in sample.drawn()]
    others = [i for i in range(POPULATION) if i not in set(drawn)]
    human, llm = run - base, run_llm - base_llm
    low, high = classical_mean_ci(human[drawn], alpha=0.05)
    ppi_low, ppi_high = (v[0] for v in ppi_mean_ci(human[drawn], llm[drawn], llm[others], 0.05))
    only = test.human_only
    assert (only.n, test.n) == (HUMAN, POPULATION)
    assert (only.delta, only.ci_low, only.ci_high) == pytest.approx(
        (human[drawn].mean(), low, high), abs=1e-12
    )
    assert (test.ci_low, test.ci_high) == pytest.approx((ppi_low, ppi_high), abs=1e-12)
    assert test.effective_n == pytest.approx(HUMAN * ((high - low) / (ppi_high - ppi_low)) ** 2)
    assert round(test.effective_n) == 224  # docs/gate.md's worked example
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict  # the JSON keeps it
    # The gap to resolving the band, in human-judged queries: alone, or at this LLM-judged share.
    res = _ndcg(verdict).resolution
    assert (res.queries, res.llm_per_human) == (HUMAN, POPULATION / HUMAN)
    assert res.needed_ppi / res.needed == pytest.approx(HUMAN / test.effective_n, rel=0.01)

    row = (
        f"| synth/ours | nDCG@10 | {only.delta:+.4f} [{low:+.4f}, {high:+.4f}] | {HUMAN} | "
        f"{test.delta:+.4f} [{ppi_low:+.4f}, {ppi_high:+.4f}] | {POPULATION} | 224 |"
    )
    gap = f"| {HUMAN} | about {res.needed} queries (+{res.needed - HUMAN}), or {res.needed_ppi} "
    first_screen = to_markdown(verdict).split("## What this suite can tell", 1)[1].split("\n## ")[0]
    assert row in first_screen and gap in first_screen and "Effective n" in first_screen
    html = to_html(verdict).split('id="resolution"', 1)[1].split("</section>")[0]
    assert f"{only.delta:+.4f} [{low:+.4f}, {high:+.4f}]" in html and "<td>224</td>" in html

    # Human-only, the delta's interval is the bootstrap's and no PPI table is shown.
    human_only = _verdict(run_summary, base_summary, "interval")
    assert _ndcg(human_only).paired.human_only is None
    assert "Effective n" not in to_markdown(human_only)


def _with(summary: RunSummary, measure: str, truth: np.ndarray, llm: np.ndarray) -> RunSummary:
    """The summary with a second measure on the same queries."""

    def add(values: dict, source: np.ndarray) -> dict:
        return {q: {**v, measure: float(source[int(q[1:])])} for q, v in values.items()}

    human = add(summary.per_query, truth)
    return summary.model_copy(
        update={
            "measures": {
                **summary.measures,
                measure: float(np.mean(truth[[int(q[1:]) for q in human]])),
            },
            "per_query": human,
            "sample_per_query": human,
            "llm_per_query": add(summary.llm_per_query, llm),
        }
    )


def test_ppi_fail_claims_are_bonferroni_widened_and_p_values_holm_adjusted_across_measures():
    from ppi_py import ppi_mean_ci

    from rageval_pipeline.core.statistics.paired import holm

    base, run, base_llm, run_llm, sample = _world()
    rng = np.random.default_rng(7)
    base_r, run_r = rng.uniform(0.2, 1.0, POPULATION), rng.uniform(0.2, 1.0, POPULATION)
    run_summary = _with(_summary(run, run_llm, sample), "R@100", run_r, np.clip(run_r + 0.05, 0, 1))
    base_summary = _with(
        _summary(base, base_llm, sample), "R@100", base_r, np.clip(base_r + 0.05, 0, 1)
    )
    verdict = _verdict(run_summary, base_summary, "ppi", compare=["nDCG@10", "R@100"])
    checks = {c.measure: c.paired for c in verdict.checks if c.kind == "baseline"}
    assert set(checks) == {"nDCG@10", "R@100"}

    drawn = [int(q[1:]) for q in sample.drawn()]
    others = [i for i in range(POPULATION) if i not in set(drawn)]
    human, llm = run - base, run_llm - base_llm
    wide = [v[0] for v in ppi_mean_ci(human[drawn], llm[drawn], llm[others], alpha=0.05 / 2)]
    ndcg = checks["nDCG@10"]
    assert (ndcg.family_low, ndcg.family_high) == pytest.approx(wide, abs=1e-12)
    assert ndcg.family_low < ndcg.ci_low and ndcg.family_high > ndcg.ci_high
    raw = [checks[m].p_value for m in ("nDCG@10", "R@100")]
    assert [checks[m].p_holm for m in ("nDCG@10", "R@100")] == pytest.approx(list(holm(raw)))
    # The drop is still established beyond the band with the widened interval.
    assert ndcg.family_high < -0.05 * base_summary.measures["nDCG@10"]
