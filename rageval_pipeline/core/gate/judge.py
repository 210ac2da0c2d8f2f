"""Judging: every run against its policy rules and baseline, giving checks and a verdict."""

from __future__ import annotations

from rageval_pipeline.core.gate.evaluation import EPS, Evaluation, deltas
from rageval_pipeline.core.gate.latency import latency_baseline_checks, latency_max_checks
from rageval_pipeline.core.gate.models import (
    Baseline,
    Check,
    CheckKind,
    QueryRegression,
    RunSummary,
    Verdict,
)
from rageval_pipeline.core.gate.policy import GatePolicy
from rageval_pipeline.core.measures.names import parse_measure, sort_key


def _absolute_check(run: Evaluation, measure: str, limit: float, kind: CheckKind) -> Check:
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
    higher = parse_measure(measure).higher_is_better
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
        category=parse_measure(measure).category if blocking else None,
        message=f"{run.label} {measure} = {value:.4f} {relation} {kind} {limit:.4f}",
    )
    if blocking or passed:
        return check
    return check.model_copy(update={"message": check.message + " (advisory)"})


def _baseline_check(run: Evaluation, measure: str, baseline: Baseline, blocking: bool) -> Check:
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
    higher = parse_measure(measure).higher_is_better
    worsening = reference - value if higher else value - reference
    passed = worsening <= band.allowed(reference) + EPS
    relation = "within" if passed else ("<" if higher else ">")
    bound = f"baseline {reference:.4f} {'-' if higher else '+'} {band.describe(reference)}"
    return run.compared(
        kind="baseline",
        measure=measure,
        value=value,
        reference=reference,
        passed=passed,
        blocking=blocking,
        category=parse_measure(measure).category,
        message=f"{run.label} {measure} = {value:.4f} {relation} {bound}",
    )


def _compared_measures(run: Evaluation, baseline: Baseline) -> list[str]:
    if run.rules.compare is not None:
        return list(run.rules.compare)
    return sorted(set(run.summary.measures) & set(baseline.measures), key=sort_key)


def _primary_measure(run: Evaluation, compared: list[str]) -> str | None:
    if run.rules.spike.measure:
        return run.rules.spike.measure
    if "nDCG@10" in compared:
        return "nDCG@10"
    return compared[0] if compared else None


def _per_query_pairs(
    run: Evaluation, baseline: Baseline, measure: str
) -> list[tuple[str, float, float]]:
    """(query_id, baseline value, run value) for queries measured in both, by query id."""
    ours = run.summary.per_query
    return [
        (qid, values[measure], ours[qid][measure])
        for qid, values in sorted(baseline.per_query.items())
        if measure in values and measure in ours.get(qid, {})
    ]


def _worsening(measure: str, reference: float, value: float) -> float:
    return reference - value if parse_measure(measure).higher_is_better else value - reference


def _spike_check(run: Evaluation, baseline: Baseline, measure: str, blocking: bool) -> Check:
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
    dropped = sum(_worsening(measure, ref, val) > spike.drop + EPS for _, ref, val in pairs)
    share = dropped / len(pairs)
    passed = share <= spike.share + EPS
    relation = "<=" if passed else ">"
    delta, relative = deltas(share, spike.share)
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
    run: Evaluation, baseline: Baseline, measure: str, limit: int
) -> list[QueryRegression]:
    worse = [
        (_worsening(measure, ref, val), qid, ref, val)
        for qid, ref, val in _per_query_pairs(run, baseline, measure)
        if _worsening(measure, ref, val) > EPS
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


def _update_hint(summary: RunSummary) -> str:
    return f"rageval baseline update --dataset {summary.dataset} --system {summary.system}"


def _baseline_status(
    run: Evaluation, baseline: Baseline | None
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
    run: Evaluation, baseline: Baseline | None, worst_limit: int
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
    checks += latency_max_checks(run)
    if baseline is not None:
        checks += latency_baseline_checks(run, baseline, blocking)
    shown = {c.measure for c in checks}
    checks += [_value_check(run, m, v) for m, v in run.summary.measures.items() if m not in shown]
    return checks, worst


def _value_check(run: Evaluation, measure: str, value: float) -> Check:
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
        run = Evaluation(summary, policy.rules_for(summary.dataset))
        run_checks, run_worst = _judge_run(
            run, baselines.get((summary.dataset, summary.system)), policy.worst_queries
        )
        checks += run_checks
        worst += run_worst
    # Run stamps are UTC ISO-8601 strings, so string order is time order.
    stamp = created_at or max((s.created_at for s in runs), default="")
    return Verdict(created_at=stamp, checks=checks, worst_queries=worst)
