"""The release gate: tolerances, taxonomy, fingerprints, latency and its policy/baseline files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import (
    Baseline,
    GatePolicy,
    RunSummary,
    Verdict,
    baseline_from_summary,
    baseline_path,
    decide,
    load_baseline,
    load_baselines,
    load_policy,
    write_baseline,
)
from rageval_pipeline.core.measures import parse_measure
from rageval_pipeline.core.report import to_markdown

FIXTURES = Path(__file__).parent / "fixtures" / "gate"
REPO_POLICY = Path(__file__).parent.parent / "data" / "gate.yaml"
STABLE_LATENCY = {"all": {"p50": 10.0, "p95": 30.0}}


def summary(
    measures: dict[str, float],
    *,
    per_query: dict[str, dict[str, float]] | None = None,
    latency: dict[str, dict[str, float]] | None = None,
    fingerprint: str = "cfg-1",
    dataset: str = "nfcorpus",
    split: str = "test",
    system: str = "bm25",
    machine: str | None = "machine-1",
    suite: str | None = "suite-1",
) -> RunSummary:
    return RunSummary(
        machine=machine,
        suite=suite,
        dataset=dataset,
        split=split,
        system=system,
        fingerprint=fingerprint,
        run_id=f"run-{system}",
        created_at="2026-02-01T10:00:00+00:00",
        measures=measures,
        per_query=per_query or {},
        latency=STABLE_LATENCY if latency is None else latency,
        n_queries=len(per_query or {}) or 10,
    )


def compare(
    run: RunSummary, base: RunSummary, policy: GatePolicy | None = None, **kwargs: object
) -> Verdict:
    baselines = {(base.dataset, base.system): baseline_from_summary(base, **kwargs)}
    return decide([run], baselines, policy or GatePolicy())


def only(verdict: Verdict, kind: str, measure: str | None = None):
    found = [
        c for c in verdict.checks if c.kind == kind and (measure is None or c.measure == measure)
    ]
    assert len(found) == 1, found
    return found[0]


# ----------------------------------------------------------------------------- baseline tolerance


def test_noise_within_tolerance_passes():
    verdict = compare(summary({"nDCG@10": 0.3100}), summary({"nDCG@10": 0.3210}))
    assert verdict.passed
    assert verdict.categories == []
    assert verdict.summary.startswith("PASS")
    assert only(verdict, "baseline", "nDCG@10").passed


def test_drop_beyond_tolerance_fails_naming_measure_and_delta():
    verdict = compare(summary({"nDCG@10": 0.2810}), summary({"nDCG@10": 0.3210}))
    assert not verdict.passed
    [failure] = verdict.failures
    assert failure.measure == "nDCG@10"
    assert failure.delta == pytest.approx(-0.04)
    assert failure.message == (
        "nfcorpus/bm25 nDCG@10 = 0.2810 < baseline 0.3210 - 5% (delta -0.0400, -12.5%); no "
        "per-query values in both run and baseline, so the mean alone decides"
    )
    assert verdict.summary.startswith("FAIL: 1 blocking failure(s) in 1 of 1 run(s)")


@pytest.mark.parametrize(("value", "passed"), [(0.38, True), (0.3799, False)])
def test_drop_of_exactly_the_tolerance_passes(value, passed):
    verdict = compare(summary({"R@100": value}), summary({"R@100": 0.40}))
    assert verdict.passed is passed


@pytest.mark.parametrize(
    ("tolerance", "value", "passed"),
    [
        ({"relative": None, "absolute": 0.02}, 0.385, True),
        ({"relative": None, "absolute": 0.02}, 0.375, False),
        # Both bands: the wider one (absolute 0.05 > 5% of 0.4) decides.
        ({"relative": 0.05, "absolute": 0.05}, 0.36, True),
        ({"relative": 0.05, "absolute": 0.05}, 0.34, False),
        # A per-measure override replaces the field it writes: 25% of 0.4 = 0.1.
        ({"relative": 0.05, "per_measure": {"R@100": {"relative": 0.25}}}, 0.31, True),
        ({"relative": 0.05, "per_measure": {"R@100": {"relative": 0.25}}}, 0.29, False),
    ],
)
def test_tolerance_bands(tolerance, value, passed):
    policy = GatePolicy.model_validate({"datasets": {"default": {"tolerance": tolerance}}})
    verdict = compare(summary({"R@100": value}), summary({"R@100": 0.40}), policy)
    assert verdict.passed is passed


def test_compare_list_restricts_compared_measures_and_requires_them():
    policy = GatePolicy.model_validate({"datasets": {"default": {"compare": ["R@100", "RR"]}}})
    verdict = compare(
        summary({"nDCG@10": 0.1, "R@100": 0.5}), summary({"nDCG@10": 0.4, "R@100": 0.5}), policy
    )
    assert {c.measure for c in verdict.checks if c.kind == "baseline"} == {"R@100", "RR"}
    [failure] = verdict.failures
    assert failure.measure == "RR"
    assert "not computed by this run" in failure.message


# ------------------------------------------------------------------------------------- taxonomy

UNIFORM = {f"q{i}": {"nDCG@10": 0.5} for i in range(8)}
# 3 of 8 queries lose 0.3 while 5 gain 0.18: the mean is unchanged, the damage is not.
SPIKED = {f"q{i}": {"nDCG@10": 0.2 if i < 3 else 0.68} for i in range(8)}
GOOD = {"R@100": 0.6, "nDCG@10": 0.5, "Diversity@10": 0.8, "Clustering@10": 0.2}
INTENT_LATENCY = {"all": {"p50": 10.0, "p95": 30.0}, "intent=factual": {"p50": 9.0, "p95": 40.0}}

TAXONOMY_CASES = {
    "recall_drop": ({**GOOD, "R@100": 0.50}, {}, None),
    "ranking_shift": ({**GOOD, "nDCG@10": 0.40}, {q: {"nDCG@10": 0.4} for q in UNIFORM}, None),
    "diversity_collapse": ({**GOOD, "Diversity@10": 0.60}, {}, None),
    "semantic_degraded_spike": (GOOD, SPIKED, None),
    "latency_regression": (
        GOOD,
        {},
        {**INTENT_LATENCY, "intent=factual": {"p50": 9.0, "p95": 80.0}},
    ),
}


@pytest.mark.parametrize("category", sorted(TAXONOMY_CASES))
def test_each_category_is_triggered_by_its_own_pattern_only(category):
    measures, per_query, latency = TAXONOMY_CASES[category]
    base = summary(GOOD, per_query=UNIFORM, latency=INTENT_LATENCY)
    run = summary(measures, per_query=per_query or UNIFORM, latency=latency or INTENT_LATENCY)
    # 8 queries cannot resolve the band on a spread-out change (the spike's unchanged mean):
    # inconclusive would block too; the categories alone are under test here.
    # Every measure compared (the default decides on the primary one and watches the rest).
    rules = {"statistics": {"inconclusive": "warn"}, "compare": sorted(GOOD)}
    verdict = compare(run, base, GatePolicy.model_validate({"datasets": {"default": rules}}))
    assert not verdict.passed
    assert verdict.categories == [category]
    assert all(c.category == category for c in verdict.failures)


def test_unchanged_run_triggers_no_category():
    base = summary(GOOD, per_query=UNIFORM, latency=INTENT_LATENCY)
    verdict = compare(base, base)
    assert verdict.passed
    assert verdict.categories == []
    assert all(c.category is None for c in verdict.checks)


def test_spike_skipped_without_per_query_baseline_values():
    verdict = compare(summary(GOOD, per_query=SPIKED), summary(GOOD))
    spike = only(verdict, "spike")
    assert spike.passed and not spike.blocking
    assert "skipped" in spike.message


def test_spike_uses_first_compared_measure_without_ndcg():
    base = summary({"RR": 0.5}, per_query={f"q{i}": {"RR": 0.5} for i in range(4)})
    run = summary({"RR": 0.5}, per_query={f"q{i}": {"RR": 0.1 if i < 2 else 0.9} for i in range(4)})
    verdict = compare(run, base)
    assert only(verdict, "spike").measure == "RR"
    assert verdict.categories == ["semantic_degraded_spike"]


def test_worst_queries_lists_the_largest_drops_first():
    policy = GatePolicy(worst_queries=2)
    base = summary(
        GOOD, per_query={"a": {"nDCG@10": 0.9}, "b": {"nDCG@10": 0.9}, "c": {"nDCG@10": 0.9}}
    )
    run = summary(
        GOOD, per_query={"a": {"nDCG@10": 0.8}, "b": {"nDCG@10": 0.1}, "c": {"nDCG@10": 0.95}}
    )
    verdict = compare(run, base, policy)
    assert [(w.query_id, round(w.delta, 4)) for w in verdict.worst_queries] == [
        ("b", -0.8),
        ("a", -0.1),
    ]


# ---------------------------------------------------------------------------- Clustering direction


@pytest.mark.parametrize(("value", "passed"), [(0.15, True), (0.20, True), (0.30, False)])
def test_clustering_fails_when_it_rises(value, passed):
    verdict = compare(summary({"Clustering@10": value}), summary({"Clustering@10": 0.20}))
    assert verdict.passed is passed
    if not passed:
        assert verdict.categories == ["diversity_collapse"]
        assert "> baseline 0.2000 + 5%" in verdict.failures[0].message


@pytest.mark.parametrize(("value", "passed"), [(0.20, True), (0.30, False)])
def test_clustering_threshold_is_a_maximum(value, passed):
    policy = GatePolicy.model_validate(
        {"datasets": {"default": {"thresholds": {"Clustering@10": 0.25}}}}
    )
    verdict = decide([summary({"Clustering@10": value})], {}, policy)
    assert only(verdict, "threshold").passed is passed


# ------------------------------------------------------------------- thresholds and targets


def test_threshold_blocks_and_target_only_warns():
    policy = load_policy(FIXTURES / "policy.yaml")  # nfcorpus: nDCG@10 >= 0.30, target R@100 0.80
    verdict = decide([summary({"nDCG@10": 0.35, "R@100": 0.5})], {}, policy)
    assert verdict.passed
    target = only(verdict, "target")
    assert not target.passed and not target.blocking
    assert "(advisory)" in target.message
    assert target.category is None  # a missed target is not a regression

    failing = decide([summary({"nDCG@10": 0.25, "R@100": 0.9})], {}, policy)
    [failure] = failing.failures
    assert (failure.kind, failure.measure, failure.reference) == ("threshold", "nDCG@10", 0.30)
    assert "0.2500 < threshold 0.3000" in failure.message
    assert failing.categories == ["ranking_shift"]


def test_threshold_on_a_measure_the_run_lacks_blocks():
    policy = GatePolicy.model_validate({"datasets": {"default": {"thresholds": {"R@100": 0.5}}}})
    verdict = decide([summary({"nDCG@10": 0.5})], {}, policy)
    assert not verdict.passed
    assert "not computed" in verdict.failures[0].message


# ------------------------------------------------------------------- fingerprint, missing baseline


def _config_run(measures, fingerprint, k1):
    run = summary(measures, fingerprint=fingerprint)
    return run.model_copy(update={"config": {"retriever": "bm25", "k1": k1, "b": 0.75}})


def test_a_changed_configuration_is_judged_against_the_baseline_not_refused():
    base = _config_run({"nDCG@10": 0.40}, "cfg-old", 1.5)
    verdict = compare(_config_run({"nDCG@10": 0.30}, "cfg-new", 0.3), base)
    assert not verdict.passed
    [failure] = verdict.failures
    assert (failure.kind, failure.measure, failure.category) == (
        "baseline",
        "nDCG@10",
        "ranking_shift",
    )
    info = only(verdict, "configuration")
    assert info.passed and not info.blocking and "k1: 1.5 -> 0.3" in info.message
    [change] = verdict.changes
    assert [(c.key, c.before, c.after) for c in change.config] == [("k1", 1.5, 0.3)]
    assert change.compared_with == "baseline" and change.baseline_fingerprint == "cfg-old"
    # The same change that holds the measures passes.
    assert compare(_config_run({"nDCG@10": 0.40}, "cfg-new", 0.3), base).passed


def test_a_changed_suite_without_query_digests_blocks_and_asks_for_an_update():
    policy = GatePolicy.model_validate({"datasets": {"default": {"thresholds": {"nDCG@10": 0.2}}}})
    base = summary({"nDCG@10": 0.40}, suite="suite-old")
    verdict = compare(summary({"nDCG@10": 0.30}, suite="suite-new"), base, policy)
    assert not verdict.passed  # the threshold alone does not decide: nothing to compare on
    suite_check = only(verdict, "suite")
    assert not suite_check.passed and suite_check.blocking
    assert "no per-query digests" in suite_check.message
    assert "rageval baseline update" in suite_check.message
    assert not [c for c in verdict.checks if c.kind == "baseline"]
    assert verdict.changes[0].suite_changed and verdict.changes[0].compared_with == "thresholds"
    # A baseline recorded before suites were fingerprinted stays comparable.
    verdict = compare(summary({"nDCG@10": 0.30}), summary({"nDCG@10": 0.40}, suite=None))
    assert not verdict.passed and verdict.changes[0].compared_with == "baseline"


def test_a_suite_that_dropped_judged_queries_of_the_baseline_blocks_naming_them():
    # The queries that got worse removed from the qrels: the suite changed, and the changed
    # suite alone would leave only the thresholds to judge it.
    base_pq = {f"q{i:02d}": {"nDCG@10": 0.5} for i in range(30)}
    run_pq = {q: v for q, v in base_pq.items() if q not in ("q03", "q07")}
    base = summary({"nDCG@10": 0.5}, per_query=base_pq, suite="suite-old")
    verdict = compare(summary({"nDCG@10": 0.5}, per_query=run_pq, suite="suite-new"), base)
    dropped = [c for c in verdict.checks if c.kind == "suite" and "are gone" in c.message]
    assert not verdict.passed and len(dropped) == 1
    assert dropped[0].blocking and not dropped[0].passed
    assert "2 judged queries of the baseline are gone" in dropped[0].message
    assert "(q03, q07)" in dropped[0].message and "--force" in dropped[0].message


def test_a_changed_suite_is_judged_against_the_baseline_configuration_re_run_on_it():
    from rageval_pipeline.core.gate.models import Rerun

    base = summary({"nDCG@10": 0.80}, suite="suite-old")
    # On the new suite the baseline's configuration scores 0.50: the run's 0.48 is no drop...
    rerun = Rerun(measures={"nDCG@10": 0.50})
    run = summary({"nDCG@10": 0.48}, suite="suite-new").model_copy(update={"baseline_rerun": rerun})
    verdict = compare(run, base)
    assert verdict.passed and verdict.changes[0].compared_with == "rerun"
    assert "re-run on this suite" in only(verdict, "suite").message
    assert only(verdict, "baseline", "nDCG@10").reference == 0.50
    # ...but 0.30 is, although both are far below the old suite's 0.80.
    worse = run.model_copy(update={"measures": {"nDCG@10": 0.30}})
    assert [c.measure for c in compare(worse, base).failures] == ["nDCG@10"]


def _spread(values: dict[str, float], n: int = 40, shift: float = 0.0):
    return {
        f"q{i:02d}": {m: v + shift + 0.01 * (i % 5) for m, v in values.items()} for i in range(n)
    }


def test_a_watched_measure_that_collapses_warns_under_its_own_category():
    policy = GatePolicy.model_validate({"datasets": {"default": {"compare": ["nDCG@10"]}}})
    good = {"nDCG@10": 0.5, "R@100": 0.9, "P@5": 0.4}
    base_pq = _spread(good)
    run_pq = {q: {**v, "R@100": v["R@100"] - 0.3} for q, v in base_pq.items()}
    mean = lambda pq, m: sum(v[m] for v in pq.values()) / len(pq)  # noqa: E731
    base = summary({m: mean(base_pq, m) for m in good}, per_query=base_pq)
    run = summary({m: mean(run_pq, m) for m in good}, per_query=run_pq)
    verdict = compare(run, base, policy)
    assert verdict.passed  # only `compare` blocks
    recall = only(verdict, "watched", "R@100")
    assert not recall.passed and not recall.blocking and recall.category == "recall_drop"
    assert recall.paired is not None and recall.paired.p_holm < 0.05
    assert only(verdict, "watched", "P@5").passed
    assert verdict.categories == ["recall_drop"]


def test_an_improvement_established_by_the_statistics_is_named():
    base_pq = _spread({"nDCG@10": 0.4})
    run_pq = _spread({"nDCG@10": 0.4}, shift=0.2)
    mean = lambda pq: sum(v["nDCG@10"] for v in pq.values()) / len(pq)  # noqa: E731
    verdict = compare(
        summary({"nDCG@10": mean(run_pq)}, per_query=run_pq),
        summary({"nDCG@10": mean(base_pq)}, per_query=base_pq),
    )
    assert verdict.passed and only(verdict, "baseline", "nDCG@10").improved
    assert "improved: bm25 nDCG@10" in verdict.summary
    # Noise within tolerance is not an improvement.
    assert not compare(summary({"nDCG@10": 0.401}), summary({"nDCG@10": 0.40})).improvements


def test_latency_is_compared_with_the_baseline_configuration_timed_side_by_side():
    slow = {"all": {"p50": 200.0, "p95": 400.0}}
    base = summary({"nDCG@10": 0.4})  # its latency: 10/30 ms, timed elsewhere
    # The machine is saturated: both configurations slow down alike, so nothing regressed.
    loaded = summary({"nDCG@10": 0.4}, latency=slow).model_copy(
        update={"baseline_latency": {"all": {"p50": 190.0, "p95": 410.0}}}
    )
    verdict = compare(loaded, base)
    assert verdict.passed
    assert "timed in this run" in only(verdict, "latency_baseline", "p50").message
    # Against the side-by-side reference, a real slowdown still blocks.
    slower = loaded.model_copy(update={"baseline_latency": {"all": {"p50": 20.0, "p95": 40.0}}})
    assert only(compare(slower, base), "latency_baseline", "p50").blocking
    assert compare(slower, base).categories == ["latency_regression"]


def test_latency_timed_on_another_machine_is_advisory():
    slow = {"all": {"p50": 200.0, "p95": 400.0}}
    verdict = compare(
        summary({"nDCG@10": 0.4}, latency=slow, machine="ci-box"), summary({"nDCG@10": 0.4})
    )
    assert verdict.passed
    check = only(verdict, "latency_baseline", "p50")
    assert not check.passed and not check.blocking and "another machine" in check.message
    assert check.category is None and verdict.categories == []  # advisory: nothing established


def test_missing_baseline_warns_and_thresholds_still_apply():
    policy = GatePolicy.model_validate({"datasets": {"default": {"thresholds": {"nDCG@10": 0.5}}}})
    verdict = decide([summary({"nDCG@10": 0.6})], {}, policy)
    assert verdict.passed
    missing = only(verdict, "missing_baseline")
    assert not missing.passed and not missing.blocking
    assert "no baseline" in missing.message

    verdict = decide([summary({"nDCG@10": 0.4})], {}, policy)
    assert [c.kind for c in verdict.failures] == ["threshold"]


def test_measures_without_any_rule_are_reported_as_values():
    policy = GatePolicy.model_validate({"datasets": {"default": {"thresholds": {"nDCG@10": 0.5}}}})
    verdict = decide([summary({"nDCG@10": 0.6, "RR": 0.75})], {}, policy)
    [value] = [c for c in verdict.checks if c.kind == "value"]
    assert (value.measure, value.value, value.passed, value.blocking) == ("RR", 0.75, True, False)
    assert "| RR | 0.7500 |" in to_markdown(verdict)


def test_baseline_of_another_split_counts_as_missing():
    verdict = compare(summary({"nDCG@10": 0.1}, split="dev"), summary({"nDCG@10": 0.5}))
    assert verdict.passed
    assert "split test" in only(verdict, "missing_baseline").message


# -------------------------------------------------------------------------------------- latency


def test_latency_regression_by_intent_names_the_group():
    base = summary(GOOD, latency={**INTENT_LATENCY, "intent=howto": {"p50": 20.0, "p95": 50.0}})
    run = summary(
        GOOD,
        latency={
            **INTENT_LATENCY,
            "intent=factual": {"p50": 9.0, "p95": 80.0},
            "intent=howto": {"p50": 21.0, "p95": 52.0},
        },
    )
    verdict = compare(run, base)
    [failure] = verdict.failures
    assert (failure.group, failure.measure, failure.category) == (
        "intent=factual",
        "p95",
        "latency_regression",
    )
    assert "[intent=factual] = 80.0 ms" in failure.message
    assert "delta +40.0 ms" in failure.message


def test_latency_groups_outside_the_compared_attributes_are_not_gated():
    slow = {"p50": 90.0, "p95": 300.0}
    base = summary(GOOD, latency={**INTENT_LATENCY, "difficulty=hard": {"p50": 9.0, "p95": 30.0}})
    run = summary(GOOD, latency={**INTENT_LATENCY, "difficulty=hard": slow})
    assert compare(run, base).passed
    policy = GatePolicy.model_validate(
        {"datasets": {"default": {"latency_tolerance": {"attributes": ["intent", "difficulty"]}}}}
    )
    verdict = decide([run], {("nfcorpus", "bm25"): baseline_from_summary(base)}, policy)
    assert [(c.group, c.measure) for c in verdict.failures] == [
        ("difficulty=hard", "p50"),
        ("difficulty=hard", "p95"),
    ]


@pytest.mark.parametrize(
    ("stat", "timed", "blocks"),
    [
        ("p95", 19, False),
        ("p95", 20, True),
        ("p50", 10, True),
        ("p50", 9, False),
        ("p99", 99, False),
    ],
)
def test_a_tail_percentile_of_too_few_queries_is_advisory(stat, timed, blocks):
    # p95 needs 20 timings to be more than the slowest one or two; p99 needs 100; any
    # percentile needs 10 (MIN_TIMINGS).
    slow = {"p50": 10.0, "p95": 30.0, "p99": 40.0} | {stat: 400.0}
    base = summary(GOOD, latency={"all": {"p50": 10.0, "p95": 30.0, "p99": 40.0}})
    run = summary(GOOD, latency={"all": slow}).model_copy(
        update={"latency_queries": {"all": timed}}
    )
    policy = GatePolicy.model_validate(
        {"datasets": {"default": {"latency_tolerance": {"stats": [stat]}}}}
    )
    verdict = decide([run], {("nfcorpus", "bm25"): baseline_from_summary(base)}, policy)
    check = only(verdict, "latency_baseline", stat)
    assert not check.passed and (check.category == "latency_regression") is blocks
    assert check.blocking is blocks and verdict.passed is not blocks
    assert ("advisory" in check.message) is not blocks


def test_latency_jitter_below_the_floor_passes():
    # +100% but only +2 ms: under the 5 ms floor.
    base = summary(GOOD, latency={"all": {"p50": 2.0, "p95": 3.0}})
    run = summary(GOOD, latency={"all": {"p50": 4.0, "p95": 5.0}})
    assert compare(run, base).passed


def test_latency_max_applies_to_overall_statistics():
    policy = load_policy(FIXTURES / "policy.yaml")  # nfcorpus: p95 <= 500 ms
    run = summary({"nDCG@10": 0.5}, latency={"all": {"p50": 100.0, "p95": 612.0}})
    verdict = decide([run], {}, policy)
    failure = only(verdict, "latency")
    assert not failure.passed and failure.blocking
    assert failure.category == "latency_regression"
    assert "612.0 ms > max 500.0 ms" in failure.message


# --------------------------------------------------------------------------- decide as a whole


def test_judge_is_deterministic_and_order_independent():
    runs = [
        summary({"nDCG@10": 0.3}, system="dense"),
        summary({"nDCG@10": 0.2}, system="bm25"),
    ]
    baselines = {("nfcorpus", "bm25"): baseline_from_summary(summary({"nDCG@10": 0.4}))}
    first = decide(runs, baselines, GatePolicy())
    second = decide(list(reversed(runs)), baselines, GatePolicy())
    assert first.model_dump() == second.model_dump()
    assert first.runs == [("nfcorpus", "test", "bm25"), ("nfcorpus", "test", "dense")]


def test_no_runs_fails_closed():
    verdict = decide([], {}, GatePolicy())
    assert not verdict.passed
    assert verdict.summary == "FAIL: no runs were judged"


def test_duplicate_runs_are_rejected():
    with pytest.raises(ValueError, match="more than one summary"):
        decide([summary({}), summary({})], {}, GatePolicy())


# --------------------------------------------------------------------------------------- policy


def test_policy_rules_exact_name_then_first_matching_pattern():
    policy = load_policy(FIXTURES / "policy.yaml")
    # The policy holds measure objects, parsed once on load; they dump as their names.
    assert policy.rules_for("nfcorpus").thresholds == {parse_measure("nDCG@10"): 0.30}
    assert policy.rules_for("nfcorpus").model_dump()["thresholds"] == {"nDCG@10": 0.30}
    # "cqa*" comes before "cqadupstack-*", so it wins for cqadupstack-android.
    cqa = policy.rules_for("cqadupstack-android").tolerance
    assert (cqa.relative, cqa.absolute) == (None, 0.02)
    other = policy.rules_for("scifact")
    assert other.thresholds == {}
    assert other.tolerance.relative == 0.05


def test_dataset_entry_only_replaces_the_fields_it_writes():
    policy = GatePolicy.model_validate(
        {
            "datasets": {
                "default": {"tolerance": {"relative": 0.1}, "latency_tolerance": {"floor_ms": 9}},
                "scifact": {"thresholds": {"nDCG@10": 0.6}},
            }
        }
    )
    rules = policy.rules_for("scifact")
    assert rules.model_dump()["thresholds"] == {"nDCG@10": 0.6}
    assert rules.tolerance.relative == 0.1
    assert rules.latency_tolerance.floor_ms == 9


def test_repository_policy_has_the_documented_default():
    rules = load_policy(REPO_POLICY).rules_for("any-dataset")
    assert rules.thresholds == {}
    assert (rules.tolerance.relative, rules.tolerance.absolute) == (0.05, None)
    assert (rules.latency_tolerance.relative, rules.latency_tolerance.floor_ms) == (1.0, 25)
    # The golden suites block on what still moves there (MRR at grade >= 2, nDCG@10, Judged@10);
    # the seeds' thresholds are reported as advisory targets.
    for suite in ("techdocs", "hotel"):
        rules = load_policy(REPO_POLICY).rules_for(suite)
        assert rules.thresholds == {}
        assert rules.model_dump()["compare"] == ["RR(rel=2)", "nDCG@10"]
        assert rules.unjudged.blocking
        assert rules.targets[parse_measure("RR")] == 0.70
    assert load_policy(REPO_POLICY).rules_for("techdocs").targets[parse_measure("P@5")] == 0.70
    hotel = load_policy(REPO_POLICY).rules_for("hotel")
    assert hotel.targets[parse_measure("P(rel=2)@5")] == 0.60


@pytest.mark.parametrize(
    ("name", "field", "line"),
    [
        ("policy_bad_type.yaml", 'datasets["default"].tolerance.relative', 5),
        ("policy_unknown_key.yaml", 'datasets["default"].tolerence', 4),
        ("policy_bad_syntax.yaml", None, 5),
    ],
)
def test_policy_errors_name_file_field_and_line(name, field, line):
    with pytest.raises(InputError) as raised:
        load_policy(FIXTURES / name)
    error = raised.value
    assert error.path == str(FIXTURES / name)
    assert error.field == field
    assert error.line == line
    assert name in str(error)


# ------------------------------------------------------------------------------------ baselines


@pytest.mark.parametrize(
    ("name", "field", "line"),
    [
        ("baseline_bad_measure.json", 'measures["nDCG@10"]', 6),
        ("baseline_bad_version.json", "version", 10),
        ("baseline_bad_json.json", None, 3),
    ],
)
def test_baseline_errors_name_file_field_and_line(name, field, line):
    with pytest.raises(InputError) as raised:
        load_baseline(FIXTURES / name)
    assert (raised.value.field, raised.value.line) == (field, line)
    assert name in str(raised.value)


def test_write_then_load_baseline_round_trips(tmp_path):
    run = summary(
        {"nDCG@10": 0.123456789, "R@100": 0.5},
        per_query={"q1": {"nDCG@10": 0.123456789}},  # its mean, as a baseline file must
        latency={"all": {"p50": 1.0000004, "p95": 2.0}},
    )
    baseline = baseline_from_summary(run, note="reviewed")
    path = baseline_path(tmp_path, "nfcorpus", "bm25")
    write_baseline(baseline, path)
    first = path.read_text()
    write_baseline(load_baseline(path), path)

    assert path.read_text() == first  # stable: rewriting a loaded baseline changes nothing
    assert first.endswith("}\n")
    assert '\n  "dataset": "nfcorpus",' in first
    assert list(json.loads(first)) == sorted(json.loads(first))
    loaded = load_baseline(path)
    assert loaded.measures == {"nDCG@10": 0.123457, "R@100": 0.5}
    assert loaded.latency["all"]["p50"] == 1.0
    assert (loaded.source_run_id, loaded.note, loaded.version) == ("run-bm25", "reviewed", "1")
    assert loaded.recorded_at == run.created_at
    assert sorted(p.name for p in path.parent.iterdir()) == ["bm25.json"]  # no temp file left


def test_load_baselines_keys_by_dataset_and_system():
    baselines = load_baselines(FIXTURES / "baselines")
    assert list(baselines) == [("nfcorpus", "bm25")]
    assert isinstance(baselines[("nfcorpus", "bm25")], Baseline)
    assert baselines[("nfcorpus", "bm25")].measures["nDCG@10"] == 0.321


def test_load_baselines_rejects_a_misplaced_file(tmp_path):
    fixture = (FIXTURES / "baselines" / "nfcorpus" / "bm25.json").read_text()
    (tmp_path / "nfcorpus").mkdir()
    (tmp_path / "nfcorpus" / "dense.json").write_text(fixture)
    with pytest.raises(InputError) as raised:
        load_baselines(tmp_path)
    assert raised.value.field == "system"
    assert "dense.json" in str(raised.value)


def test_baseline_path_refuses_names_that_escape_the_root(tmp_path):
    assert baseline_path(tmp_path, "nfcorpus", "bm25") == tmp_path / "nfcorpus" / "bm25.json"
    with pytest.raises(InputError) as raised:
        baseline_path(tmp_path, "..", "bm25")
    assert raised.value.field == "dataset"


# ------------------------------------------------------------------------- measure names in policy

SPELLED = """\
version: 1
datasets:
  default:
    thresholds: {{{ndcg}: 0.30, {rr}: 0.50}}
    targets: {{{recall}: 0.80}}
    compare: [{ndcg}, {recall}, {rr}]
    tolerance:
      relative: 0.05
      per_measure:
        {rr}: {{relative: 0.5}}
    spike: {{measure: {ndcg}}}
"""


def write_policy(tmp_path: Path, text: str, name: str = "gate.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("ndcg", "rr", "recall"),
    [
        ("NDCG@10", "MRR", "recall_100"),
        ("ndcg_cut_10", "recip_rank", "Recall@100"),
        ("ndcg_cut.10", "RR", "recall.100"),
    ],
)
def test_common_spellings_gate_exactly_like_canonical_names(tmp_path, ndcg, rr, recall):
    canonical = load_policy(
        write_policy(tmp_path, SPELLED.format(ndcg="nDCG@10", rr="RR", recall="R@100"), "a.yaml")
    )
    spelled = load_policy(write_policy(tmp_path, SPELLED.format(ndcg=ndcg, rr=rr, recall=recall)))
    assert spelled == canonical
    per_query = {"q1": {"nDCG@10": 0.1, "RR": 0.2, "R@100": 0.9}}
    run = summary({"nDCG@10": 0.29, "RR": 0.30, "R@100": 0.70}, per_query=per_query)
    base = summary({"nDCG@10": 0.40, "RR": 0.55, "R@100": 0.75}, per_query=per_query)
    verdicts = [compare(run, base, policy) for policy in (canonical, spelled)]
    assert verdicts[0].checks == verdicts[1].checks
    # Every rule applied, under the canonical name: nothing "not computed", nothing ignored.
    kinds = {(c.kind, c.measure, c.passed) for c in verdicts[1].checks if c.measure}
    assert {
        ("threshold", "nDCG@10", False),
        ("threshold", "RR", False),
        ("target", "R@100", False),
        ("baseline", "nDCG@10", False),
        ("baseline", "RR", True),  # per_measure MRR: 50% band, 0.30 >= 0.55 - 0.275
        ("baseline", "R@100", False),
        ("spike", "nDCG@10", True),
    } <= kinds


KNOWN = (
    "P, R, F1, RR, nDCG, AP, Success, Rprec, Judged, ER, Diversity, Clustering, "
    "EvidenceRecall, TokenPrecision, TokenIoU, Tokens"
)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            "    thresholds: {nDGC@10: 0.3}\n",
            '4: datasets["default"].thresholds["nDGC@10"]: unknown measure "nDGC@10" (known: '
            f"{KNOWN})",
        ),
        (
            "    targets:\n      R@100: 0.8\n      Recal@100: 0.8\n",
            '6: datasets["default"].targets["Recal@100"]: unknown measure "Recal@100" (known: '
            f"{KNOWN})",
        ),
        (
            "    compare: [nDCG@10, Rprec@5]\n",
            '4: datasets["default"].compare[1]: measure "Rprec@5": Rprec takes no cutoff',
        ),
        (
            "    tolerance:\n      per_measure:\n        MRRR: {relative: 0.1}\n",
            '6: datasets["default"].tolerance.per_measure["MRRR"]: unknown measure "MRRR" '
            f"(known: {KNOWN})",
        ),
        (
            "    spike: {measure: nDCG}\n",
            '4: datasets["default"].spike.measure: measure "nDCG": nDCG needs a cutoff, '
            "e.g. nDCG@10",
        ),
    ],
)
def test_misspelt_measure_fails_at_load_naming_file_line_and_field(tmp_path, rules, expected):
    path = write_policy(tmp_path, f"version: 1\ndatasets:\n  default:\n{rules}")
    with pytest.raises(InputError) as raised:
        load_policy(path)
    assert str(raised.value) == f"{path}:{expected}"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            "    thresholds: {nDCG@10: 0.3, NDCG@10: 0.4}",
            'thresholds: "nDCG@10" and "NDCG@10" both name nDCG@10',
        ),
        (
            "    targets: {MRR: 0.3, recip_rank: 0.4}",
            'targets: "MRR" and "recip_rank" both name RR',
        ),
        ("    compare: [P@5, P_5]", 'compare: "P@5" and "P_5" both name P@5'),
        (
            "    tolerance: {per_measure: {map: {relative: 1}, AP: {relative: 1}}}",
            'tolerance.per_measure: "map" and "AP" both name AP',
        ),
    ],
)
def test_two_spellings_of_one_measure_are_an_error(tmp_path, rules, expected):
    path = write_policy(tmp_path, f"version: 1\ndatasets:\n  default:\n{rules}\n")
    with pytest.raises(InputError) as raised:
        load_policy(path)
    assert str(raised.value) == f'{path}:4: datasets["default"].{expected}'


@pytest.mark.parametrize(
    ("measure", "category"),
    [
        ("F1@10", "recall_drop"),
        ("R@100", "recall_drop"),
        ("Success@5", "recall_drop"),
        ("ER@10", "recall_drop"),
        ("nDCG@10", "ranking_shift"),
        ("P(rel=2)@5", "ranking_shift"),
        ("AP", "ranking_shift"),
        ("Rprec", "ranking_shift"),
        ("Diversity@10", "diversity_collapse"),
    ],
)
def test_every_quality_measure_drop_carries_a_regression_category(measure, category):
    verdict = compare(summary({measure: 0.30}), summary({measure: 0.60}))
    assert only(verdict, "baseline", measure).category == category
    assert verdict.categories == [category]


def test_clustering_rise_is_the_regression():
    verdict = compare(summary({"Clustering@10": 0.9}), summary({"Clustering@10": 0.3}))
    assert only(verdict, "baseline", "Clustering@10").category == "diversity_collapse"
    assert compare(summary({"Clustering@10": 0.2}), summary({"Clustering@10": 0.3})).passed


def test_judged_drop_is_the_unjudged_check_not_a_baseline_comparison():
    # Coverage is not retrieval quality: a Judged@10 fall is unjudged_spike, advisory by default.
    verdict = compare(summary({"Judged@10": 0.7}), summary({"Judged@10": 0.9}))
    assert not [c for c in verdict.checks if c.kind == "baseline"]
    check = only(verdict, "unjudged", "Judged@10")
    assert check.category == "unjudged_spike" and not check.blocking
    assert check.value == pytest.approx(0.3) and check.reference == pytest.approx(0.1)
    assert verdict.passed


@pytest.mark.parametrize(("judged", "broken"), [(0.45, False), (0.449, True), (0.0, True)])
def test_a_run_that_lost_most_judged_documents_is_blocked_as_unjudged_run(judged, broken):
    # Losing more than half (unjudged.broken) of the baseline's judged documents is no real
    # change: every id replaced, another corpus, a chunking without derived judgments.
    verdict = compare(summary({"Judged@10": judged}), summary({"Judged@10": 0.9}))
    check = only(verdict, "unjudged", "Judged@10")
    assert verdict.passed is not broken and check.blocking is broken
    if broken:
        assert check.category == "unjudged_run" and verdict.categories == ["unjudged_run"]
        assert "ids likely do not match the corpus" in check.message
        assert "`rageval pool`" in check.message and "\n" not in check.message


@pytest.mark.parametrize(("judged", "foreign"), [(0.45, False), (0.449, True), (0.0, True)])
def test_a_baseline_of_another_corpus_is_not_compared_and_never_improved(judged, foreign):
    # The unjudged_run bound read the other way: a baseline lacking more than half
    # (unjudged.broken) of the run's judged documents was recorded on another corpus; every
    # measure of it is near zero, so the run would otherwise read as improved.
    from rageval_pipeline.core.report import Report
    from rageval_pipeline.core.report.states import run_state
    from rageval_pipeline.core.report.summary import next_steps

    run = summary({"Judged@10": 0.9, "nDCG@10": 0.60}, per_query=None)
    base = summary({"Judged@10": judged, "nDCG@10": 0.0 if foreign else 0.55})
    verdict = compare(run, base)
    assert verdict.passed and verdict.changes[0].compared_with == (
        "thresholds" if foreign else "baseline"
    )
    assert bool([c for c in verdict.checks if c.kind == "baseline"]) is not foreign
    if foreign:
        check = only(verdict, "unjudged", "Judged@10")
        assert not check.passed and not check.blocking and check.category is None
        assert "its baseline retrieves documents the suite never judged" in check.message
        assert "judged on absolute thresholds only" in check.message
        assert not verdict.improvements
        assert run_state(verdict.checks)[0] == "PASS with warnings"
        steps = next_steps(Report(verdict=verdict))
        assert steps == [check.message] and "baseline update" not in " ".join(steps)


def test_baseline_measure_names_are_canonicalised_on_load(tmp_path):
    path = tmp_path / "nfcorpus" / "bm25.json"
    path.parent.mkdir()
    data = json.loads((FIXTURES / "baselines" / "nfcorpus" / "bm25.json").read_text())
    data["measures"] = {"ndcg_cut_10": 0.321, "MRR": 0.5}
    path.write_text(json.dumps(data, indent=2))
    assert load_baseline(path).measures == {"nDCG@10": 0.321, "RR": 0.5}
