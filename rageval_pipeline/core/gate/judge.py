"""Judging: every run against its policy rules and baseline, giving checks and a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rageval_pipeline.core.gate.models import (
    LATENCY_STATS,
    OVERALL,
    Baseline,
    Category,
    Check,
    CheckKind,
    QueryRegression,
    RunSummary,
    Verdict,
)
from rageval_pipeline.core.gate.policy import GatePolicy, GateRules
from rageval_pipeline.core.measures.names import parse_measure, sort_key

# Values read back from 6-decimal baselines must not fail a comparison that sits on the boundary.
_EPS = 1e-9


def _deltas(value: float, reference: float) -> tuple[float, float | None]:
    delta = value - reference
    return delta, (delta / reference if reference else None)


def _delta_text(delta: float, relative: float | None, unit: str = "") -> str:
    digits = ".1f" if unit else ".4f"
    text = f"delta {delta:+{digits}}{unit}"
    return text + (f", {relative:+.1%}" if relative is not None else "")


def _category(measure: str) -> Category | None:
    return parse_measure(measure).category


def _higher_is_better(measure: str) -> bool:
    return parse_measure(measure).higher_is_better


@dataclass(frozen=True)
class _Evaluation:
    summary: RunSummary
    rules: GateRules

    @property
    def label(self) -> str:
        return f"{self.summary.dataset}/{self.summary.system}"

    def check(self, **fields: Any) -> Check:
        s = self.summary
        return Check(dataset=s.dataset, split=s.split, system=s.system, **fields)

    def compared(
        self,
        *,
        value: float,
        reference: float,
        passed: bool,
        category: Category | None,
        message: str,
        unit: str = "",
        **fields: Any,
    ) -> Check:
        """A check of `value` against `reference`: deltas computed, the failure's taxonomy
        label kept only when it failed, and the delta appended to the message."""
        delta, relative = _deltas(value, reference)
        return self.check(
            value=value,
            reference=reference,
            delta=delta,
            relative_delta=relative,
            passed=passed,
            category=None if passed else category,
            message=f"{message} ({_delta_text(delta, relative, unit)})",
            **fields,
        )


def _absolute_check(run: _Evaluation, measure: str, limit: float, kind: CheckKind) -> Check:
    blocking = kind == "threshold"
    value = run.summary.measures.get(measure)
    if value is None:
        return run.check(
            kind=kind,
            measure=measure,
            reference=limit,
            passed=False,
            blocking=blocking,
            message=f"{run.label} {measure} was not computed by this run but the policy has a "
            f"{kind} for it",
        )
    higher = _higher_is_better(measure)
    passed = value >= limit if higher else value <= limit
    relation = (">=" if passed else "<") if higher else ("<=" if passed else ">")
    check = run.compared(
        kind=kind,
        measure=measure,
        value=value,
        reference=limit,
        passed=passed,
        blocking=blocking,
        # A missed advisory target is not a regression: it carries no taxonomy label.
        category=_category(measure) if blocking else None,
        message=f"{run.label} {measure} = {value:.4f} {relation} {kind} {limit:.4f}",
    )
    if blocking or passed:
        return check
    return check.model_copy(update={"message": check.message + " (advisory)"})


def _baseline_check(run: _Evaluation, measure: str, baseline: Baseline, blocking: bool) -> Check:
    value = run.summary.measures.get(measure)
    reference = baseline.measures.get(measure)
    if value is None or reference is None:
        # A measure the run lacks can hide a regression; one the baseline lacks cannot.
        missing_in_run = value is None
        return run.check(
            kind="baseline",
            measure=measure,
            value=value,
            reference=reference,
            passed=False,
            blocking=blocking and missing_in_run,
            message=f"{run.label} {measure} is compared with the baseline but was not computed "
            "by this run"
            if missing_in_run
            else f"{run.label} {measure} is not in the baseline; update the baseline to compare it",
        )
    band = run.rules.tolerance.for_measure(measure)
    higher = _higher_is_better(measure)
    worsening = reference - value if higher else value - reference
    passed = worsening <= band.allowed(reference) + _EPS
    relation = "within" if passed else ("<" if higher else ">")
    bound = f"baseline {reference:.4f} {'-' if higher else '+'} {band.describe(reference)}"
    return run.compared(
        kind="baseline",
        measure=measure,
        value=value,
        reference=reference,
        passed=passed,
        blocking=blocking,
        category=_category(measure),
        message=f"{run.label} {measure} = {value:.4f} {relation} {bound}",
    )


def _compared_measures(run: _Evaluation, baseline: Baseline) -> list[str]:
    if run.rules.compare is not None:
        return list(run.rules.compare)
    return sorted(set(run.summary.measures) & set(baseline.measures), key=sort_key)


def _primary_measure(run: _Evaluation, compared: list[str]) -> str | None:
    if run.rules.spike.measure:
        return run.rules.spike.measure
    if "nDCG@10" in compared:
        return "nDCG@10"
    return compared[0] if compared else None


def _per_query_pairs(
    run: _Evaluation, baseline: Baseline, measure: str
) -> list[tuple[str, float, float]]:
    """(query_id, baseline value, run value) for queries measured in both, by query id."""
    ours = run.summary.per_query
    return [
        (qid, values[measure], ours[qid][measure])
        for qid, values in sorted(baseline.per_query.items())
        if measure in values and measure in ours.get(qid, {})
    ]


def _worsening(measure: str, reference: float, value: float) -> float:
    return reference - value if _higher_is_better(measure) else value - reference


def _spike_check(run: _Evaluation, baseline: Baseline, measure: str, blocking: bool) -> Check:
    spike = run.rules.spike
    pairs = _per_query_pairs(run, baseline, measure)
    if not pairs:
        return run.check(
            kind="spike",
            measure=measure,
            passed=True,
            blocking=False,
            message=f"{run.label} {measure}: no per-query values in both the run and the "
            "baseline, so the spike check was skipped",
        )
    dropped = sum(_worsening(measure, ref, val) > spike.drop + _EPS for _, ref, val in pairs)
    share = dropped / len(pairs)
    passed = share <= spike.share + _EPS
    relation = "<=" if passed else ">"
    delta, relative = _deltas(share, spike.share)
    return run.check(
        kind="spike",
        measure=measure,
        value=share,
        reference=spike.share,
        delta=delta,
        relative_delta=relative,
        passed=passed,
        blocking=blocking,
        category=None if passed else "semantic_degraded_spike",
        message=f"{run.label} {measure} worsened by more than {spike.drop:g} on {dropped} of "
        f"{len(pairs)} queries ({share:.1%} {relation} {spike.share:.1%} allowed)",
    )


def _worst_queries(
    run: _Evaluation, baseline: Baseline, measure: str, limit: int
) -> list[QueryRegression]:
    worse = [
        (_worsening(measure, ref, val), qid, ref, val)
        for qid, ref, val in _per_query_pairs(run, baseline, measure)
        if _worsening(measure, ref, val) > _EPS
    ]
    worse.sort(key=lambda item: (-item[0], item[1]))
    s = run.summary
    return [
        QueryRegression(
            dataset=s.dataset,
            split=s.split,
            system=s.system,
            query_id=qid,
            measure=measure,
            baseline=ref,
            value=val,
            delta=val - ref,
        )
        for _, qid, ref, val in worse[:limit]
    ]


def _groups(groups: Iterable[str]) -> list[str]:
    """Latency groups with the overall group first, the rest sorted."""
    return sorted(groups, key=lambda g: (g != OVERALL, g))


def _latency_max_checks(run: _Evaluation) -> list[Check]:
    overall = run.summary.latency.get(OVERALL, {})
    checks = []
    for stat in LATENCY_STATS:
        limit = run.rules.latency_max_ms.get(stat)
        if limit is None:
            continue
        value = overall.get(stat)
        if value is None:
            checks.append(
                run.check(
                    kind="latency",
                    measure=stat,
                    group=OVERALL,
                    reference=limit,
                    passed=False,
                    blocking=True,
                    message=f"{run.label} latency {stat} [{OVERALL}] was not measured but the "
                    "policy limits it",
                )
            )
            continue
        passed = value <= limit
        checks.append(
            run.compared(
                kind="latency",
                measure=stat,
                group=OVERALL,
                value=value,
                reference=limit,
                passed=passed,
                blocking=True,
                category="latency_regression",
                unit=" ms",
                message=f"{run.label} latency {stat} [{OVERALL}] = {value:.1f} ms "
                f"{'<=' if passed else '>'} max {limit:.1f} ms",
            )
        )
    return checks


def _latency_baseline_checks(run: _Evaluation, baseline: Baseline, blocking: bool) -> list[Check]:
    tolerance = run.rules.latency_tolerance
    checks = []
    shared = set(run.summary.latency) & set(baseline.latency)
    for group in _groups(g for g in shared if tolerance.compares(g)):
        ours, theirs = run.summary.latency[group], baseline.latency[group]
        for stat in tolerance.stats:
            if stat not in ours or stat not in theirs:
                continue
            value, reference = ours[stat], theirs[stat]
            passed = not (
                value > reference * (1 + tolerance.relative) + _EPS
                and value - reference > tolerance.floor_ms + _EPS
            )
            bound = (
                f"baseline {reference:.1f} ms + {tolerance.relative * 100:g}% and "
                f"+ {tolerance.floor_ms:g} ms"
            )
            checks.append(
                run.compared(
                    kind="latency_baseline",
                    measure=stat,
                    group=group,
                    value=value,
                    reference=reference,
                    passed=passed,
                    blocking=blocking,
                    category="latency_regression",
                    unit=" ms",
                    message=f"{run.label} latency {stat} [{group}] = {value:.1f} ms "
                    f"{'within' if passed else '>'} {bound}",
                )
            )
    return checks


def _update_hint(summary: RunSummary) -> str:
    return f"rageval baseline update --dataset {summary.dataset} --system {summary.system}"


def _baseline_status(
    run: _Evaluation, baseline: Baseline | None
) -> tuple[Check, Baseline | None, bool]:
    """The fingerprint or missing-baseline check, the baseline to compare with (None when there
    is none for this split) and whether those comparisons may block."""
    s = run.summary
    if baseline is None or baseline.split != s.split:
        where = "" if baseline is None else f" (the baseline is for split {baseline.split})"
        check = run.check(
            kind="missing_baseline",
            passed=False,
            blocking=False,
            message=f"{run.label} has no baseline for split {s.split}{where}; only absolute "
            f"thresholds apply. Record one after review: {_update_hint(s)}",
        )
        return check, None, False
    if baseline.fingerprint != s.fingerprint:
        check = run.check(
            kind="fingerprint",
            passed=False,
            blocking=True,
            message=f"{run.label} baseline was recorded for another configuration (fingerprint "
            f"{baseline.fingerprint} != {s.fingerprint}); the deltas below are information "
            f"only. Review the run and update the baseline: {_update_hint(s)}",
        )
        return check, baseline, False
    check = run.check(
        kind="fingerprint",
        passed=True,
        blocking=True,
        message=f"{run.label} baseline fingerprint matches ({s.fingerprint})",
    )
    return check, baseline, True


def _judge_run(
    run: _Evaluation, baseline: Baseline | None, worst_limit: int
) -> tuple[list[Check], list[QueryRegression]]:
    status, baseline, blocking = _baseline_status(run, baseline)
    checks = [status]
    checks += [_absolute_check(run, m, v, "threshold") for m, v in run.rules.thresholds.items()]
    checks += [_absolute_check(run, m, v, "target") for m, v in run.rules.targets.items()]
    worst: list[QueryRegression] = []
    if baseline is not None:
        compared = _compared_measures(run, baseline)
        checks += [_baseline_check(run, m, baseline, blocking) for m in compared]
        primary = _primary_measure(run, compared)
        if primary is not None:
            checks.append(_spike_check(run, baseline, primary, blocking))
            worst = _worst_queries(run, baseline, primary, worst_limit)
    checks += _latency_max_checks(run)
    if baseline is not None:
        checks += _latency_baseline_checks(run, baseline, blocking)
    shown = {c.measure for c in checks}
    checks += [_value_check(run, m, v) for m, v in run.summary.measures.items() if m not in shown]
    return checks, worst


def _value_check(run: _Evaluation, measure: str, value: float) -> Check:
    """A measure no rule covers: reported so every report shows the run's full results."""
    return run.check(
        kind="value",
        measure=measure,
        value=value,
        passed=True,
        blocking=False,
        message=f"{run.label} {measure} = {value:.4f}",
    )


def judge(
    summaries: list[RunSummary],
    baselines: dict[tuple[str, str], Baseline],
    policy: GatePolicy,
    *,
    created_at: str | None = None,
) -> Verdict:
    """Judge every run against the policy and its (dataset, system) baseline.

    `created_at` defaults to the newest run's timestamp, so judging the same runs twice gives
    byte-identical reports.
    """
    runs = sorted(summaries, key=lambda s: (s.dataset, s.split, s.system))
    keys = [(s.dataset, s.split, s.system) for s in runs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"more than one summary for (dataset, split, system): {duplicates}")
    checks: list[Check] = []
    worst: list[QueryRegression] = []
    for summary in runs:
        run = _Evaluation(summary, policy.rules_for(summary.dataset))
        run_checks, run_worst = _judge_run(
            run, baselines.get((summary.dataset, summary.system)), policy.worst_queries
        )
        checks += run_checks
        worst += run_worst
    # Run stamps are UTC ISO-8601 strings, so string order is time order.
    stamp = created_at or max((s.created_at for s in runs), default="")
    return Verdict(created_at=stamp, checks=checks, worst_queries=worst)
