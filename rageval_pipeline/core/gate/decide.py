"""Deciding: every run against its policy rules and baseline, giving checks and a verdict.

The checks themselves live beside this module: `rules` (the policy's absolute rule kinds:
thresholds, targets, shares of queries, ...), `quality` (measures against the baseline, with
paired statistics), `coverage` (unjudged documents), `latency`; `evaluation` is what they share.
"""

from __future__ import annotations

from collections.abc import Mapping

from rageval_pipeline.core.gate.anchoring import anchor_check
from rageval_pipeline.core.gate.breakage import breakage_check
from rageval_pipeline.core.gate.changes import (
    describe,
    rerun_baseline,
    run_change,
    suite_changed,
)
from rageval_pipeline.core.gate.comparable import Comparability, comparability
from rageval_pipeline.core.gate.coverage import (
    dropped_check,
    explain_drops,
    foreign_baseline,
    unjudged_check,
)
from rageval_pipeline.core.gate.evaluation import Evaluation
from rageval_pipeline.core.gate.latency import latency_baseline_checks, latency_max_checks
from rageval_pipeline.core.gate.models import (
    MEASURE_KINDS,
    Baseline,
    Check,
    QueryRegression,
    RunChange,
    RunSummary,
    Verdict,
)
from rageval_pipeline.core.gate.policy import GatePolicy
from rageval_pipeline.core.gate.policy_diff import deciding_policy, policy_check, policy_measures
from rageval_pipeline.core.gate.ppi_rule import refusal as ppi_refusal
from rageval_pipeline.core.gate.quality import (
    baseline_check,
    decided_measures,
    paired_tests,
    side_gains_withheld,
    spike_check,
    watched_check,
    watched_measures,
    worst_queries,
)
from rageval_pipeline.core.gate.rules import Rule
from rageval_pipeline.core.gate.run import Run
from rageval_pipeline.core.gate.unchanged import on_unchanged


def _baseline_status(
    run: Evaluation, baseline: Baseline | None, change: RunChange, rule: Comparability
) -> tuple[list[Check], Baseline | None]:
    """What the run is compared with (None: absolute limits only), and the checks that say so.

    A changed configuration is checked exactly like an unchanged one (checking changes is the
    gate's purpose); only a changed suite makes the baseline's numbers incomparable."""
    s = run.summary
    if baseline is not None and rule.refuses:
        note = f'--note "scored at {s.level} level now"'
        check = run.check(
            kind="level",
            passed=False,
            blocking=True,
            message=f"{run.label} was scored at {s.level} level and its baseline at "
            f"{baseline.level} level: the gate refuses to compare them ({s.level}-level measures "
            f"rank other units than {baseline.level}-level ones). Review the run and re-record "
            f"the baseline: {run.update_command('--force', note)}",
        )
        return [check], None
    if change.compared_with == "thresholds" and not change.suite_changed:
        where = "" if baseline is None else f" (the baseline is for split {baseline.split})"
        check = run.check(
            kind="missing_baseline",
            passed=False,
            blocking=False,
            message=f"{run.label} has no baseline for split {s.split}{where}; only absolute "
            f"thresholds apply. Record one after review: {run.update_command()}",
        )
        return [check], None
    rerun = change.compared_with == "rerun"
    if change.suite_changed:
        judged = (
            "judged against the baseline's configuration re-run on this suite"
            if rerun
            else "only absolute thresholds apply"
        )
        check = run.check(
            kind="suite",
            passed=False,
            blocking=False,
            message=f"{run.label} was measured on another suite than its baseline (the judged "
            f"queries, judgments or corpus ids changed), so the baseline's numbers are not "
            f"comparable: {judged}. Review the run and re-record the baseline: "
            f"{run.update_command()}",
        )
        return [check], baseline if rerun else None
    checks = []
    if rerun:
        checks.append(
            run.check(
                kind="configuration",
                passed=True,
                blocking=False,
                message=f"{run.label}: {change.rerun_reason} since the stored baseline, so it is "
                "judged against the baseline's configuration re-run in this run on the same "
                "queries, query by query",
            )
        )
    if change.note is not None:  # the units changed: judged on budget measures (`comparable`)
        check = run.check(
            kind="configuration", passed=bool(rule.budget), blocking=False, message=change.note
        )
        return [*checks, check], baseline
    if not change.config and change.baseline_fingerprint == change.fingerprint:
        return checks, baseline
    check = run.check(
        kind="configuration",
        passed=True,
        blocking=False,
        message=f"{run.label} configuration changed since its baseline ({describe(change)}); "
        "judged against the baseline with paired statistics",
    )
    return [*checks, check], baseline


def _decide_run(
    run: Evaluation, stored: Baseline | None, worst_limit: int, full: Evaluation | None = None
) -> tuple[list[Check], list[QueryRegression], RunChange]:
    # The baseline's configuration re-run in this run, when there is one, is what the run is
    # compared with (`changes.rerun_reason`); the stored baseline says what changed since.
    # `full`: the whole run, when `run` is narrowed to the queries a changed suite kept
    # (`unchanged`); absolute limits and the reported values are the whole run's.
    full = full or run
    s = run.summary
    rerun = stored is not None and stored.split == s.split and s.baseline_rerun is not None
    baseline = rerun_baseline(s, stored) if rerun else stored
    comparable = comparability(run, baseline)
    change = run_change(s, stored, across_levels=not comparable.refuses)
    # The policy's own list is what a loosening is judged on; what decided may differ (a
    # chunking change decides on the token budgets, whatever the policy lists).
    deciding = deciding_policy(
        run.rules,
        policy_measures(run),
        decided_measures(run, baseline, comparable)[0] if baseline is not None else (),
    )
    recorded = stored.policy if stored is not None else None
    change = change.model_copy(
        update={"note": comparable.note(run.label), "policy": deciding, "baseline_policy": recorded}
    )
    loosened = policy_check(run, deciding, stored)
    same_units = not comparable.refuses and comparable.changed is None
    foreign = foreign_baseline(run, baseline) if same_units else None
    if foreign is not None:  # another corpus's baseline: every run would read as improved
        checks, baseline = [], None
        change = change.model_copy(update={"compared_with": "thresholds"})
    else:
        checks, baseline = _baseline_status(run, baseline, change, comparable)
    checks = [loosened, *checks] if loosened is not None else checks
    checks += filter(None, [dropped_check(run, stored)] if change.suite_changed else [])
    checks += [rule.check(full) for rule in comparable.limits(run.rules.limits())]
    worst: list[QueryRegression] = []
    coverage = foreign or unjudged_check(run, baseline if comparable.changed is None else None)
    refused = None
    if baseline is not None and run.rules.statistics.rule == "ppi":
        refused = ppi_refusal(run, baseline)
        checks += [refused] if refused else []
    if baseline is not None and refused is None:
        compared, primary = decided_measures(run, baseline, comparable)
        tests = paired_tests(run, baseline, compared)
        quality = [baseline_check(run, m, baseline, tests.get(m)) for m in compared]
        if primary is not None:
            quality.append(spike_check(run, baseline, primary))
            quality += filter(None, [breakage_check(run, baseline, primary)])
            worst = worst_queries(run, baseline, primary, worst_limit)
            if baseline is stored and (held := anchor_check(run, stored, primary)) is not None:
                quality.append(held)
        watched = comparable.watched(watched_measures(run, baseline, compared))
        watched_tests = paired_tests(run, baseline, watched)
        side = [watched_check(run, m, baseline, watched_tests.get(m)) for m in watched]
        quality += side_gains_withheld(quality, side)
        checks += explain_drops(quality, coverage)
    if coverage is not None:
        checks.append(coverage)
    checks += latency_max_checks(full)
    if baseline is not None:
        checks += latency_baseline_checks(full, baseline)
    shown = {c.measure for c in checks if c.kind in MEASURE_KINDS}
    checks += [
        _value_check(full, m, v, comparable.not_compared(m, baseline))
        for m, v in full.summary.measures.items()
        if m not in shown
    ]
    return checks, worst, change


def _decide_suite(
    run: Evaluation, stored: Baseline | None, worst_limit: int
) -> tuple[list[Check], list[QueryRegression], RunChange]:
    """`_decide_run`, but against a baseline of another suite version without a re-run of its
    configuration: on the unchanged queries, or blocked when too few remain (`unchanged`)."""
    s = run.summary
    if (
        stored is None
        or stored.split != s.split
        or s.baseline_rerun is not None
        or not suite_changed(s, stored)
    ):
        return _decide_run(run, stored, worst_limit)
    kept = on_unchanged(run, stored)
    # The baseline's judged queries gone from the whole run count against it, whichever way
    # the rest is compared (the narrowed pair has lost nothing).
    dropped = [d for d in [dropped_check(run, stored)] if d is not None]
    if kept.run is None:
        checks, worst, change = _decide_run(run, stored, worst_limit)
        return [kept.check, *dropped, *(c for c in checks if c.kind != "suite")], worst, change
    checks, worst, change = _decide_run(kept.run, kept.baseline, worst_limit, full=run)
    update = {"suite_changed": True, "compared_with": "unchanged", "unchanged": kept.unchanged}
    return [kept.check, *dropped, *checks], worst, change.model_copy(update=update)


def _value_check(run: Evaluation, measure: str, value: float, why: str = "") -> Check:
    """A measure no rule covers: reported so every report shows the run's full results
    (`why`: why it was not compared with the baseline)."""
    return run.check(
        kind="value",
        measure=measure,
        value=value,
        passed=True,
        blocking=False,
        message=f"{run.label} {measure} = {value:.4f}{why}",
    )


def decide(
    summaries: list[RunSummary],
    baselines: dict[tuple[str, str], Baseline],
    policy: GatePolicy,
    *,
    created_at: str | None = None,
) -> Verdict:
    """Check every run against the policy and its (dataset, system) baseline.

    `created_at` defaults to the newest run's timestamp, so deciding on the same runs twice gives
    byte-identical reports.
    """
    runs = sorted(summaries, key=lambda s: (s.dataset, s.split, s.system))
    keys = [(s.dataset, s.split, s.system) for s in runs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"more than one summary for (dataset, split, system): {duplicates}")
    checks: list[Check] = []
    worst: list[QueryRegression] = []
    changes: list[RunChange] = []
    for summary in runs:
        run = Evaluation(summary, policy.rules_for(summary.dataset))
        run_checks, run_worst, change = _decide_suite(
            run, baselines.get((summary.dataset, summary.system)), policy.worst_queries
        )
        checks += run_checks
        worst += run_worst
        changes.append(change)
    # Run stamps are UTC ISO-8601 strings, so string order is time order.
    stamp = created_at or max((s.created_at for s in runs), default="")
    return Verdict(created_at=stamp, checks=checks, worst_queries=worst, changes=changes)


def decide_validation(
    summary: RunSummary, policy: GatePolicy, *, integrity: Mapping[str, float] | None = None
) -> list[tuple[Rule, Check]]:
    """The validation report's criteria (the `validation` rules of the run's dataset), each with
    its check of the run; `integrity` is its chunks' rates (core.gate.rules.INTEGRITY_RATES)
    when measured. They decide the validation report's PASS/FAIL, never the release."""
    run = Run(summary, integrity=integrity)
    return [(rule, rule.check(run)) for rule in policy.rules_for(summary.dataset).validation]
