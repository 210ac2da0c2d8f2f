"""The deciding policy on the first screen and diffed with the baseline's: a policy loosened in
the same change as a drop blocks with a `policy` check naming each loosened field, old -> new,
unless the policy file approves that very change; tightening passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.gate import GatePolicy, RunSummary, decide
from rageval_pipeline.core.gate.baselines import baseline_from_summary
from rageval_pipeline.core.gate.deciding import DecidingPolicy
from rageval_pipeline.core.gate.policy import Breakage
from rageval_pipeline.core.gate.policy_diff import loosened, recorded_policy
from rageval_pipeline.core.report.deciding import policy_blocks
from tests.test_cli_gate import _gate, suite  # noqa: F401 - the module's fixture

POLICY = "version: 1\ndatasets:\n  default:\n"


def _rules(**fields) -> GatePolicy:
    return GatePolicy.model_validate({"version": 1, "datasets": {"default": fields}})


def _summary(values: list[float], run_id: str) -> RunSummary:
    per_query = {f"q{i:02d}": {"nDCG@10": v, "R@100": 0.9} for i, v in enumerate(values)}
    return RunSummary(
        dataset="d",
        split="test",
        system="s",
        fingerprint="f",
        run_id=run_id,
        created_at="2026-01-04T12:00:00+00:00",
        measures={"nDCG@10": sum(values) / len(values), "R@100": 0.9},
        per_query=per_query,
        n_queries=len(values),
    )


def _recorded(policy: GatePolicy):
    return recorded_policy(_summary([0.5] * 30, "b"), policy.rules_for("d"))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (
            {"statistics": {"inconclusive": "warn"}},
            ["statistics.inconclusive: block -> block_likely"],
        ),
        ({"statistics": {"alpha": 0.1}}, ["statistics.alpha: 0.05 -> 0.1"]),
        ({"statistics": {"mean_within": 0.8}}, ["statistics.mean_within: 0.5 -> 0.8"]),
        ({"breakage": {"blocking": False}}, ["breakage.blocking: True -> False"]),
        ({"breakage": {"count": 5}}, [f"breakage.count: {Breakage().count} -> 5"]),
        ({"breakage": {"low": 0.05}}, ["breakage.low: 0.1 -> 0.05"]),
        ({"unjudged": {"broken": 0.9}}, ["unjudged.broken: 0.5 -> 0.9"]),
        ({"statistics": {"rule": "point"}}, ["statistics.rule: interval -> point"]),
        ({"statistics": {"rule": "significance"}}, ["statistics.rule: interval -> significance"]),
        # Without `compare` the primary measure alone decides (R@100 is watched).
        ({"compare": []}, ["compare: [nDCG@10] -> []"]),
        ({"compare": ["R@100"]}, ["compare: [nDCG@10] -> [R@100]"]),
        (
            {"tolerance": {"per_measure": {"nDCG@10": {"relative": 0.10}}}},
            ["tolerance[nDCG@10].relative: 0.05 -> 0.1"],
        ),
        (
            {"tolerance": {"relative": 0.050001}},
            ["tolerance[nDCG@10].relative: 0.05 -> 0.050001"],
        ),
        (
            {"tolerance": {"absolute": 0.01}},
            ["tolerance[nDCG@10].absolute: unset -> 0.01"],
        ),
        ({"spike": {"share": 0.5}}, ["spike.share: 0.25 -> 0.5"]),
        ({"unjudged": {"drop": 0.2}}, ["unjudged.drop: 0.1 -> 0.2"]),
        # Another seed re-draws the resampling: it needs approval like a loosening.
        (
            {"statistics": {"seed": 7}},
            [
                "statistics.seed: 0 -> 7 (a new seed re-draws the resampling; record it in "
                "`loosened:` with a reason)"
            ],
        ),
        ({"statistics": {"resamples": 9999}}, ["statistics.resamples: 10000 -> 9999"]),
        ({"statistics": {"resamples": 20000}}, []),
        ({"unjudged": {"measure": "Judged@20"}}, ["unjudged.measure: Judged@10 -> Judged@20"]),
        ({"unjudged": {"measure": "judged_10"}}, []),  # the same measure, spelled otherwise
        # Tightening, or keeping, is not loosening: the boundary sits exactly at equality.
        ({"tolerance": {"relative": 0.05}}, []),
        ({"tolerance": {"relative": 0.02}}, []),
        ({"statistics": {"alpha": 0.01, "rule": "ppi"}}, []),
        ({"unjudged": {"blocking": True}}, []),
    ],
)
def test_each_loosened_field_is_named_old_to_new(fields, named):
    old = _recorded(GatePolicy())
    new = _recorded(_rules(**fields))
    assert [str(c) for c in loosened(old, new)] == named


def test_a_threshold_lowered_or_removed_is_a_loosening():
    """A floor lowered (a maximum raised, when lower is better) or removed; a blocking
    `threshold` rule counts as one; an advisory target does not."""
    old = _recorded(_rules(thresholds={"nDCG@10": 0.3, "Clustering@10": 0.5}))

    def diff(**fields) -> list[str]:
        return [str(c) for c in loosened(old, _recorded(_rules(**fields)))]

    assert diff(thresholds={"nDCG@10": 0.29, "Clustering@10": 0.5}) == [
        "thresholds[nDCG@10]: 0.3 -> 0.29"
    ]
    assert diff(thresholds={"nDCG@10": 0.3, "Clustering@10": 0.51}) == [
        "thresholds[Clustering@10]: 0.5 -> 0.51"
    ]
    assert diff(thresholds={"Clustering@10": 0.5}, targets={"nDCG@10": 0.3}) == [
        "thresholds[nDCG@10]: 0.3 -> unset"
    ]
    assert diff(thresholds={"nDCG@10": 0.3, "Clustering@10": 0.4}) == []
    assert diff(thresholds={"nDCG@10": 0.31, "Clustering@10": 0.5}) == []
    rule = {"kind": "threshold", "measure": "nDCG@10", "min": 0.3}
    assert diff(thresholds={"Clustering@10": 0.5}, rules=[rule]) == []
    assert diff(thresholds={"Clustering@10": 0.5}, rules=[{**rule, "blocking": False}]) == [
        "thresholds[nDCG@10]: 0.3 -> unset"
    ]


def test_a_policy_recorded_before_seed_and_thresholds_were_kept_is_not_compared_on_them():
    """A baseline's policy without them is unknown there: no finding, its digest unchanged,
    and the report says they were not checked."""
    now = _recorded(_rules(statistics={"seed": 7}, thresholds={"nDCG@10": 0.1}))
    stored = _recorded(GatePolicy()).model_dump(mode="json")
    legacy = {k: v for k, v in stored.items() if k not in ("seed", "resamples", "thresholds")}
    before = DecidingPolicy.model_validate(legacy)
    assert before.unrecorded == ["statistics.seed", "statistics.resamples", "thresholds"]
    assert loosened(before, now) == []
    # The digest of such a policy is the one it was recorded with.
    shipped = json.loads(Path("data/baselines/hotel/bm25.json").read_text())["policy"]
    assert DecidingPolicy.model_validate(shipped).digest == shipped["digest"]
    assert before.digest != _recorded(GatePolicy()).digest


def test_a_new_seed_blocks_in_decide_unless_approved_and_the_report_names_it():
    base = _summary([0.5 + 0.01 * (i % 5) for i in range(30)], "b")
    baseline = baseline_from_summary(base, rules=GatePolicy().rules_for("d"))
    run = [base.model_copy(update={"run_id": "r"})]
    verdict = decide(run, {("d", "s"): baseline}, _rules(statistics={"seed": 7}))
    [check] = [c for c in verdict.checks if c.kind == "policy"]
    assert not verdict.passed and "statistics.seed: 0 -> 7 (a new seed" in check.message
    approval = {"field": "statistics.seed", "to": 7, "reason": "new bootstrap library"}
    verdict = decide(
        run, {("d", "s"): baseline}, _rules(statistics={"seed": 7}, loosened=[approval])
    )
    assert verdict.passed
    # Removing a threshold is approved as `to: unset` (as the check shows it) or `to: null`.
    floor = baseline_from_summary(base, rules=_rules(thresholds={"nDCG@10": 0.3}).rules_for("d"))
    for to in ("unset", None):
        removed = {"field": "thresholds[nDCG@10]", "to": to, "reason": "floor moved to R@100"}
        verdict = decide(run, {("d", "s"): floor}, _rules(loosened=[removed]))
        assert verdict.passed, verdict.summary
    assert not decide(run, {("d", "s"): floor}, GatePolicy()).passed
    # A baseline recorded before the seed was kept: no check, and the report says so.
    legacy = baseline.policy.model_dump(mode="json", exclude={"seed", "resamples", "thresholds"})
    old = baseline.model_copy(update={"policy": DecidingPolicy.model_validate(legacy)})
    verdict = decide(run, {("d", "s"): old}, _rules(statistics={"seed": 7}))
    assert verdict.passed
    text = " ".join(line for block in policy_blocks(verdict) for line in block.items)
    assert "recorded without statistics.seed, statistics.resamples, thresholds" in text


RELATIVE = {"tolerance": {"relative": 0.05}}  # 0.02 at the baseline's 0.4


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        # relative -> absolute: loosened only when the drop it tolerates at 0.4 is wider
        (RELATIVE, {"relative": None, "absolute": 0.02}, []),
        (RELATIVE, {"relative": None, "absolute": 0.019}, []),
        (
            RELATIVE,
            {"relative": None, "absolute": 0.0201},
            [
                "tolerance[nDCG@10].absolute: unset -> 0.0201 (the band at the baseline's "
                "0.4: 0.02 -> 0.0201)"
            ],
        ),
        # absolute -> relative
        ({"tolerance": {"relative": None, "absolute": 0.02}}, {"relative": 0.05}, []),
        ({"tolerance": {"relative": None, "absolute": 0.02}}, {"relative": 0.04}, []),
        (
            {"tolerance": {"relative": None, "absolute": 0.02}},
            {"relative": 0.0501},
            [
                "tolerance[nDCG@10].relative: unset -> 0.0501 (the band at the baseline's "
                "0.4: 0.02 -> 0.02004)"
            ],
        ),
        # both set: the wider part decides; a part that widens under the other changes nothing
        (RELATIVE, {"relative": 0.05, "absolute": 0.015}, []),
    ],
)
def test_a_band_moved_between_relative_and_absolute_is_judged_at_the_baseline_mean(old, new, named):
    stored = recorded_policy(_summary([0.4] * 30, "b"), _rules(**old).rules_for("d"))
    now = recorded_policy(_summary([0.4] * 30, "r"), _rules(tolerance=new).rules_for("d"))
    assert [str(c) for c in loosened(stored, now, {"nDCG@10": 0.4})] == named


def test_a_band_made_absolute_but_tighter_passes_in_decide():
    base = _summary([0.4 + 0.01 * (i % 5) - 0.02 for i in range(30)], "b")
    mean = base.measures["nDCG@10"]
    baseline = baseline_from_summary(base, rules=GatePolicy().rules_for("d"))
    run = [base.model_copy(update={"run_id": "r"})]
    for absolute, blocks in ((0.05 * mean, False), (0.05 * mean + 0.001, True)):
        policy = _rules(tolerance={"relative": None, "absolute": absolute})
        checks = [c for c in decide(run, {("d", "s"): baseline}, policy).checks]
        assert [c.blocking for c in checks if c.kind == "policy"] == ([True] if blocks else [])


def test_dropping_compare_or_moving_the_primary_measure_is_a_loosening():
    """What decides is compared, listed or not: removing a `compare` list leaves only the
    primary measure deciding, and `spike.measure` names another primary measure."""
    listed = _recorded(_rules(compare=["nDCG@10", "R@100"]))
    assert [str(c) for c in loosened(listed, _recorded(GatePolicy()))] == [
        "compare: [nDCG@10, R@100] -> [nDCG@10]"
    ]
    moved = _recorded(_rules(spike={"measure": "R@100"}))
    assert [str(c) for c in loosened(_recorded(GatePolicy()), moved)] == [
        "compare: [nDCG@10] -> [R@100]"
    ]


def test_mean_within_zero_is_refused_in_one_line():
    with pytest.raises(ValueError, match="mean_within"):
        _rules(statistics={"mean_within": 0})


def test_a_measure_the_run_no_longer_computes_is_no_policy_loosening():
    old = _recorded(GatePolicy())
    fewer = _summary([0.5] * 30, "r").model_copy(update={"measures": {"nDCG@10": 0.5}})
    new = recorded_policy(fewer, GatePolicy().rules_for("d"))
    assert new.compare == ["nDCG@10"] and loosened(old, new) == []
    # Listing the measure the default decides on changes no decision.
    listed = recorded_policy(fewer, _rules(compare=["nDCG@10"]).rules_for("d"))
    assert listed.compare == ["nDCG@10"] and loosened(old, listed) == []


def test_a_loosened_policy_blocks_in_decide_unless_approved():
    base = _summary([0.5 + 0.01 * (i % 5) for i in range(30)], "b")
    baseline = baseline_from_summary(base, rules=GatePolicy().rules_for("d"))
    assert baseline.policy is not None and baseline.policy.compare == ["nDCG@10"]
    loose = {"statistics": {"inconclusive": "warn"}}
    run = [base.model_copy(update={"run_id": "r"})]
    verdict = decide(run, {("d", "s"): baseline}, _rules(**loose))
    [check] = [c for c in verdict.checks if c.kind == "policy"]
    assert check.blocking and not check.passed and not verdict.passed
    assert "statistics.inconclusive: block -> block_likely" in check.message
    # the verdict line names what blocked, outside the regression taxonomy too
    assert verdict.summary == "FAIL: 1 blocking failure(s) in 1 of 1 run(s) (s): policy check"
    [change] = verdict.changes
    assert (
        change.policy.inconclusive == "block_likely" and change.baseline_policy == baseline.policy
    )

    approval = {"field": "statistics.inconclusive", "to": "warn", "reason": "flaky suite, #12"}
    verdict = decide(
        run,
        {("d", "s"): baseline},
        _rules(**loose, loosened=[approval]),
    )
    [check] = [c for c in verdict.checks if c.kind == "policy"]
    assert check.passed and "approved: flaky suite, #12" in check.message and verdict.passed
    # An approval of another value is not this change's.
    other = {**approval, "to": "block"}
    verdict = decide(run, {("d", "s"): baseline}, _rules(**loose, loosened=[other]))
    assert not verdict.passed


def _policy_file(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(POLICY + body)
    return str(path)


@pytest.mark.parametrize(
    ("loose", "field"),
    [
        (
            "    statistics: {inconclusive: warn}\n",
            "statistics.inconclusive: block -> block_likely",
        ),
        ("    compare: []\n", "compare: [nDCG@10] -> []"),
    ],
)
def test_rageval_gate_blocks_a_policy_loosened_with_a_drop(suite, capsys, tmp_path, loose, field):  # noqa: F811
    old = _policy_file(tmp_path, "old.yaml", "    compare: [nDCG@10]\n")
    new = _policy_file(tmp_path, "new.yaml", loose)
    argv = _gate(suite, suite["worse"], "--policy", new, "--baseline-policy", old)
    assert main([*argv, "--format", "json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    [check] = [c for c in verdict["checks"] if c["kind"] == "policy"]
    assert check["blocking"] and not check["passed"] and field in check["message"]
    [change] = verdict["changes"]
    assert change["policy"]["digest"] != change["baseline_policy"]["digest"]

    # The first screen names the deciding policy and the loosened field.
    assert main(argv) == 1
    first_screen = capsys.readouterr().out.split("## What this suite can tell")[0]
    assert "decided under policy" in first_screen and "rule interval, alpha 0.05" in first_screen
    assert field in first_screen


def test_rageval_gate_without_a_loosening_has_no_policy_check(suite, capsys, tmp_path):  # noqa: F811
    same = _policy_file(tmp_path, "same.yaml", "    compare: [nDCG@10]\n")
    tighter = _policy_file(tmp_path, "tight.yaml", "    compare: [nDCG@10, R@100]\n")
    argv = _gate(suite, suite["baseline"], "--policy", tighter, "--baseline-policy", same)
    assert main([*argv, "--format", "json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert not [c for c in verdict["checks"] if c["kind"] == "policy"]
    assert verdict["changes"][0]["policy"]["compare"] == ["nDCG@10", "R@100"]
