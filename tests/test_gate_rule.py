"""The decision rule's boundaries, pinned: each test fails when its boundary moves (`>=` turned
`>` at the exact band, the FAIL claim without its Bonferroni widening, low and high swapped,
the query floor gone, the broken-run block gone, the breakage guard gone, the likely drop
passed under `block_likely`). Intervals are given, not resampled: every test is a few ms."""

from __future__ import annotations

import pytest

from rageval_pipeline.core.gate import GatePolicy, RunSummary, Statistics, decide
from rageval_pipeline.core.gate.baselines import baseline_from_summary
from rageval_pipeline.core.gate.decision import MIN_PASS_QUERIES, judge
from rageval_pipeline.core.statistics.paired import PairedTest

BAND = 0.25  # exactly representable: low == -BAND is the boundary itself, no rounding
BLOCK = Statistics()


def paired(low: float, high: float, *, n: int = 50, family: tuple[float, float] | None = None):
    f_low, f_high = family or (low, high)
    return PairedTest(
        n=n,
        delta=(low + high) / 2,
        ci_low=low,
        ci_high=high,
        p_value=0.5,
        mde=0.1,
        family_low=f_low,
        family_high=f_high,
    )


def outcome(test: PairedTest, *, higher: bool = True, stats: Statistics = BLOCK) -> str:
    return judge(higher, test.delta, test, BAND, stats).outcome


def test_a_low_end_exactly_at_minus_the_band_passes_and_just_below_does_not():
    assert outcome(paired(-BAND, 0.1)) == "pass"
    assert outcome(paired(-BAND - 1e-6, 0.1)) == "inconclusive"


def test_a_fail_claim_needs_the_bonferroni_widened_interval_beyond_the_band():
    # The (1 - alpha) interval is beyond the band, the (1 - alpha/m) one reaches inside it.
    assert outcome(paired(-0.40, -0.30, family=(-0.45, -0.20))) == "inconclusive"
    assert outcome(paired(-0.40, -0.30, family=(-0.45, -0.26))) == "fail"


def test_pass_reads_the_low_end_and_fail_the_high_end():
    assert outcome(paired(-0.40, 0.01)) == "inconclusive"  # the high end is within the band
    assert outcome(paired(-0.20, 0.40)) == "pass"  # the low end is
    assert outcome(paired(-0.60, -0.26)) == "fail"


def test_a_lower_is_better_measure_is_judged_on_its_negated_interval():
    # Clustering@k's delta interval [-0.01, +0.40] is a worsening of up to 0.40: not a pass.
    assert outcome(paired(-0.01, 0.40), higher=False) == "inconclusive"
    assert outcome(paired(-0.40, 0.20), higher=False) == "pass"
    assert outcome(paired(0.26, 0.60), higher=False) == "fail"


def test_below_the_query_floor_an_interval_within_the_band_does_not_pass():
    at = judge(True, 0.0, paired(-0.1, 0.1, n=MIN_PASS_QUERIES), BAND, BLOCK)
    below = judge(True, 0.0, paired(-0.1, 0.1, n=MIN_PASS_QUERIES - 1), BAND, BLOCK)
    assert MIN_PASS_QUERIES == 20 and at.outcome == "pass" and not at.floor
    assert below.outcome == "inconclusive" and below.floor and below.blocks
    # An unmoved system (a zero-width interval) passes on any number of queries.
    assert outcome(paired(0.0, 0.0, n=3)) == "pass"


def test_block_likely_blocks_a_drop_beyond_the_band_whose_interval_excludes_zero():
    likely = Statistics(inconclusive="block_likely")
    # Beyond the band (-0.30 < -0.25) and below 0, but not established beyond the band.
    drop = judge(True, -0.30, paired(-0.55, -0.05), BAND, likely)
    assert drop.outcome == "inconclusive" and drop.likely and drop.blocks
    # The same point estimate with an interval reaching 0 only warns; so does a small drop.
    assert not judge(True, -0.30, paired(-0.60, 0.01), BAND, likely).blocks
    assert not judge(True, -0.10, paired(-0.30, -0.01), BAND, likely).blocks
    # Under the default every inconclusive measure blocks.
    assert judge(True, -0.10, paired(-0.30, 0.10), BAND, BLOCK).blocks


def test_warn_is_the_old_name_of_block_likely():
    assert Statistics.model_validate({"inconclusive": "warn"}).inconclusive == "block_likely"
    with pytest.raises(ValueError):
        Statistics.model_validate({"inconclusive": "pass"})


# ------------------------------------------------------------------ through decide: the guards


def _summary(ndcg: dict[str, float], judged: float = 1.0) -> RunSummary:
    per_query = {q: {"nDCG@10": v, "Judged@10": judged} for q, v in ndcg.items()}
    return RunSummary(
        dataset="synth",
        split="test",
        system="ours",
        fingerprint="cfg",
        run_id="run",
        created_at="2026-02-01T10:00:00+00:00",
        measures={"nDCG@10": sum(ndcg.values()) / len(ndcg), "Judged@10": judged},
        per_query=per_query,
        n_queries=len(ndcg),
    )


def _decide(run: RunSummary, base: RunSummary, **rules: object):
    policy = GatePolicy.model_validate({"datasets": {"default": rules}})
    verdict = decide([run], {("synth", "ours"): baseline_from_summary(base)}, policy)
    return verdict, {c.kind: c for c in verdict.checks if c.kind != "baseline"}


BASE = {f"q{i:03d}": 0.8 for i in range(100)}


def _broken(count: int) -> dict[str, float]:
    """`count` queries lose their answer (0.8 -> 0), the others gain 0.04."""
    return {q: 0.0 if i < count else 0.84 for i, q in enumerate(BASE)}


def test_four_of_a_hundred_queries_breaking_block_though_the_interval_passes():
    verdict, checks = _decide(_summary(_broken(4)), _summary(BASE), statistics={"resamples": 1000})
    [ndcg] = [c for c in verdict.checks if c.kind == "baseline"]
    assert ndcg.passed  # the mean rose: the interval rule alone would ship it
    guard = checks["breakage"]
    assert not verdict.passed and not guard.passed and guard.blocking
    assert verdict.categories == ["semantic_degraded_spike"]
    assert "q000 0.8000 -> 0.0000" in guard.message and "q003" in guard.message


def test_the_guard_blocks_at_its_limit_and_not_below():
    # 100 answered queries: max(count 2, 3% of 100) = 3 broken queries block.
    rules = {"breakage": {"count": 2, "share": 0.03}}
    _, at = _decide(_summary(_broken(3)), _summary(BASE), **rules)
    _, below = _decide(_summary(_broken(2)), _summary(BASE), **rules)
    assert not at["breakage"].passed and below["breakage"].passed
    assert "2 of 100 queries broke" in below["breakage"].message


def test_a_fixed_query_offsets_a_broken_one():
    base = {**BASE, "q099": 0.0}
    run = {**_broken(1), "q099": 0.9}
    _, checks = _decide(_summary(run), _summary(base))
    assert checks["breakage"].passed and "1 fixed" in checks["breakage"].message
    _, alone = _decide(_summary(_broken(1)), _summary(BASE))  # one broken query blocks
    assert not alone["breakage"].passed


def test_a_run_that_lost_its_judged_documents_is_blocked_whatever_its_measures_say():
    # Every id replaced: nothing judged in the top 10; the drops are not "explained away".
    verdict, checks = _decide(_summary(_broken(0), judged=0.0), _summary(BASE))
    assert not verdict.passed and checks["unjudged"].category == "unjudged_run"
    assert checks["unjudged"].blocking
    half, checks = _decide(_summary(BASE, judged=0.5), _summary(BASE))
    assert half.passed and checks["unjudged"].category == "unjudged_spike"


def test_a_query_the_run_does_not_answer_counts_zero_against_it():
    run = {q: v for q, v in BASE.items() if q >= "q010"}  # 10 queries left out
    verdict, _ = _decide(_summary(run), _summary(BASE), statistics={"resamples": 1000})
    [ndcg] = [c for c in verdict.checks if c.kind == "baseline"]
    assert ndcg.paired.n == 100 and ndcg.paired.delta == pytest.approx(-0.08)
    assert not verdict.passed


def test_a_resolved_near_neutral_change_passes_though_other_measures_cannot_tell():
    # nDCG@10 moves by +-0.01 per query (resolved); R@100 swings by +-0.3 (unresolvable on 100
    # queries). Compared, R@100 would block as inconclusive; watched, it only reports.
    base = {f"q{i:03d}": {"nDCG@10": 0.6, "R@100": 0.6} for i in range(100)}
    run = {
        q: {"nDCG@10": 0.6 + (0.01 if i % 2 else -0.01), "R@100": 0.6 + (0.3 if i % 2 else -0.3)}
        for i, q in enumerate(base)
    }

    def as_summary(values):
        means = {m: sum(v[m] for v in values.values()) / len(values) for m in ("nDCG@10", "R@100")}
        return _summary({q: v["nDCG@10"] for q, v in values.items()}).model_copy(
            update={"measures": means, "per_query": values}
        )

    rules = {"statistics": {"resamples": 1000}}
    verdict, checks = _decide(as_summary(run), as_summary(base), **rules)
    assert verdict.passed and checks["watched"].measure == "R@100"
    blocked, _ = _decide(as_summary(run), as_summary(base), compare=["nDCG@10", "R@100"], **rules)
    assert not blocked.passed and [c.measure for c in blocked.inconclusive] == ["R@100"]


def test_a_pass_needs_the_mean_within_half_the_band():
    # The interval rules out a drop beyond the band, but the mean used more than half of it:
    # on skewed differences the sample may have missed the few queries that lose most.
    off = judge(True, -0.13, paired(-0.20, -0.06), BAND, BLOCK)
    assert off.outcome == "inconclusive" and off.off_centre and off.blocks
    at = judge(True, -0.125, paired(-0.20, -0.05), BAND, BLOCK)
    assert at.outcome == "pass"
    loose = Statistics(mean_within=1.0)  # the interval alone decides
    assert judge(True, -0.13, paired(-0.20, -0.06), BAND, loose).outcome == "pass"
