"""The gate's statistics rule, unjudged_spike and what the reports and metadata carry (core)."""

from __future__ import annotations

import math

import pytest

from rageval_pipeline.core.gate import (
    GatePolicy,
    RunSummary,
    Verdict,
    baseline_from_summary,
    decide,
)
from rageval_pipeline.core.report import plotted_values, to_json, to_markdown

DROPPED = 1 / math.log2(5)  # nDCG@10 of one relevant document at rank 4


def summary(per_query: dict[str, dict[str, float]], fingerprint: str = "cfg") -> RunSummary:
    measures = sorted({m for values in per_query.values() for m in values})
    means = {m: sum(v[m] for v in per_query.values() if m in v) / len(per_query) for m in measures}
    return RunSummary(
        dataset="synth",
        split="test",
        system="ours",
        fingerprint=fingerprint,
        run_id="run",
        created_at="2026-02-01T10:00:00+00:00",
        measures=means,
        per_query=per_query,
        intervals={m: (v - 0.01, v + 0.01) for m, v in means.items()},
        n_queries=len(per_query),
    )


def suite(n: int, dropped_every: int | None = None, **extra: float) -> RunSummary:
    """n queries at nDCG@10 1.0; every `dropped_every`-th query at rank 4 instead."""
    return summary(
        {
            f"q{i:03d}": {
                "nDCG@10": DROPPED if dropped_every and i % dropped_every == 0 else 1.0,
                **extra,
            }
            for i in range(n)
        }
    )


def verdict(run: RunSummary, base: RunSummary, **rules: object) -> Verdict:
    policy = GatePolicy.model_validate({"datasets": {"default": rules}})
    return decide([run], {("synth", "ours"): baseline_from_summary(base)}, policy)


def ndcg(v: Verdict):
    [check] = [c for c in v.checks if c.kind == "baseline" and c.measure == "nDCG@10"]
    return check


@pytest.mark.parametrize("rule", ["interval", "significance"])
def test_a_drop_on_200_queries_fails_and_the_same_drop_on_10_is_inconclusive(rule):
    rules = {"statistics": {"rule": rule}, "spike": {"share": 0.5}}
    large = verdict(suite(200, dropped_every=5), suite(200), **rules)
    assert not large.passed and large.categories == ["ranking_shift"]
    assert ndcg(large).paired.delta == pytest.approx(-(1 - DROPPED) / 5)
    small = verdict(suite(10, dropped_every=5), suite(10), **rules)
    check = ndcg(small)
    # Inconclusive blocks by default: a PASS must be earned.
    assert not small.passed and check.inconclusive and check.blocking and check.category is None
    assert small.inconclusive == [check] and small.categories == []
    assert check.message.startswith("inconclusive: ")
    assert small.summary.endswith("1 blocking failure(s) in 1 of 1 run(s) (ours): inconclusive")
    if rule == "interval":  # the resolution is the interval rule's power
        assert check.resolution is not None and not check.resolution.resolves
        assert "to resolve the band it needs about" in check.message
    # block_likely: the drop is beyond the band, but its interval [-0.2847, 0] reaches 0, so
    # it is not likely: a warning.
    warned = verdict(
        suite(10, dropped_every=5),
        suite(10),
        **rules | {"statistics": {"rule": rule, "inconclusive": "block_likely"}},
    )
    assert warned.passed and ndcg(warned).inconclusive and not ndcg(warned).blocking
    assert warned.summary.endswith("1 inconclusive")


def test_an_unchanged_system_passes_even_with_a_band_of_zero():
    for tolerance in ({}, {"relative": 0.0}):
        v = verdict(suite(20, dropped_every=5), suite(20, dropped_every=5), tolerance=tolerance)
        assert (
            v.passed
            and ndcg(v).passed
            and (ndcg(v).paired.ci_low, ndcg(v).paired.ci_high) == (0, 0)
        )
        assert ndcg(v).resolution.resolves


def test_the_point_rule_fails_on_the_mean_alone():
    rules = {"statistics": {"rule": "point"}, "spike": {"share": 0.5}}
    assert not verdict(suite(10, dropped_every=5), suite(10), **rules).passed


def test_holm_adjusts_the_p_values_across_the_compared_measures():
    run = suite(40, dropped_every=4, **{"RR": 0.5})
    v = verdict(run, suite(40, **{"RR": 0.5}), spike={"share": 0.5}, compare=["nDCG@10", "RR"])
    check = ndcg(v)
    # Two compared measures: RR did not move (p = 1), nDCG@10's p is doubled by Holm.
    assert check.paired.p_holm == pytest.approx(min(1.0, 2 * check.paired.p_value))


def test_checks_carry_the_interval_of_the_mean_and_reports_show_it():
    v = verdict(suite(20), suite(20))
    check = ndcg(v)
    assert (check.ci_low, check.ci_high) == pytest.approx((0.99, 1.01))
    assert '"ci_low": 0.99' in to_json(v)
    assert "| nDCG@10 | 1.0000 [0.9900, 1.0100] | 1.0000 |" in to_markdown(v)


def with_unjudged(n: int, judged: float, ndcg_value: float, condensed: float) -> RunSummary:
    return summary(
        {
            f"q{i:03d}": {
                "nDCG@10": ndcg_value,
                "nDCG(judged)@10": condensed,
                "Judged@10": judged,
            }
            for i in range(n)
        }
    )


def test_unjudged_documents_explain_the_standard_drops_but_not_the_condensed_ones():
    base = with_unjudged(30, 1.0, 1.0, 1.0)
    # Unjudged documents ahead of the same ranking: standard nDCG falls, condensed holds.
    # The rise itself is advisory, but the drop it may explain blocks as it would anyway:
    # missing judgments are a cause to look at, not a pass.
    advisory = verdict(with_unjudged(30, 0.5, 0.36, 1.0), base)
    assert not advisory.passed and advisory.categories == ["unjudged_spike"]
    assert ndcg(advisory).category == "unjudged_spike" and ndcg(advisory).blocking
    [rise] = [c for c in advisory.checks if c.kind == "unjudged"]
    assert not rise.passed and not rise.blocking
    blocking = verdict(with_unjudged(30, 0.5, 0.36, 1.0), base, unjudged={"blocking": True})
    assert not blocking.passed and blocking.categories == ["unjudged_spike"]
    [coverage] = [c for c in blocking.checks if c.kind == "unjudged"]
    assert coverage.value == pytest.approx(0.5) and "missing judgments" in coverage.message
    # When the condensed measure falls too, that drop is real and keeps its own label.
    real = verdict(with_unjudged(30, 0.5, 0.36, 0.5), base, unjudged={"blocking": True})
    assert real.categories == ["ranking_shift", "unjudged_spike"]


def test_a_small_rise_of_unjudged_documents_is_only_reported():
    v = verdict(with_unjudged(30, 0.95, 1.0, 1.0), with_unjudged(30, 1.0, 1.0, 1.0))
    [coverage] = [c for c in v.checks if c.kind == "unjudged"]
    assert coverage.passed and "unjudged documents in the top 10: 5.0%" in coverage.message
    assert "unjudged documents in the top 10: 5.0%" in to_markdown(v)


def test_metadata_values_are_rounded_numbers_of_the_primary_and_failing_measures():
    v = verdict(suite(200, dropped_every=5), suite(200), spike={"share": 0.5})
    values = plotted_values(v)
    assert values["synth/ours nDCG@10 delta"] == round(-(1 - DROPPED) / 5, 6)
    assert values["synth/ours nDCG@10 ci_high"] < -0.05
    assert all(isinstance(x, float) and x == round(x, 6) for x in values.values())


def test_side_measures_are_not_improved_while_a_compared_measure_did_not_pass():
    def with_side(n: int, dropped_every: int | None, diversity: float) -> RunSummary:
        run = suite(n, dropped_every)
        return summary({q: {**v, "Diversity@10": diversity} for q, v in run.per_query.items()})

    rules = {"compare": ["nDCG@10"], "spike": {"share": 0.5}}
    fell = verdict(with_side(10, 5, 0.9), with_side(10, None, 0.5), **rules)
    [side] = [c for c in fell.checks if c.measure == "Diversity@10"]
    assert ndcg(fell).inconclusive and not side.improved and fell.improvements == []
    held = verdict(with_side(10, None, 0.9), with_side(10, None, 0.5), **rules)
    [side] = [c for c in held.checks if c.measure == "Diversity@10"]
    assert held.passed and side.improved


def test_the_first_screen_shows_the_resolution_and_a_move_within_the_band():
    # 200 queries, 6 of them up from rank 4 to rank 1: +0.017, inside the 5% band.
    before = suite(200, dropped_every=5)
    after = summary(
        {
            q: {"nDCG@10": 1.0 if i < 30 and i % 5 == 0 else v["nDCG@10"]}
            for i, (q, v) in enumerate(before.per_query.items())
        }
    )
    v = verdict(after, before, spike={"share": 0.5})
    assert (
        v.passed and not v.improvements and ndcg(v).paired.delta == pytest.approx(0.0171, abs=1e-4)
    )
    first = to_markdown(v).split("## Details", 1)[0]
    res = ndcg(v).resolution
    row = next(line for line in first.splitlines() if line.startswith("| synth/ours | nDCG@10 |"))
    assert row.startswith("| synth/ours | nDCG@10 | +0.0171 [")
    assert f"| {res.band:.4f} | {res.detectable:.4f} | 200 |" in row
    assert "Nothing to do: every compared measure passed; synth/ours nDCG@10 +0.0171 [" in first
    small = to_markdown(verdict(suite(10, dropped_every=5), suite(10)))
    row = next(line for line in small.splitlines() if line.startswith("| synth/ours | nDCG@10 |"))
    assert "about 243 queries (+233), or 122 human- and 1220 LLM-judged with PPI" in row
