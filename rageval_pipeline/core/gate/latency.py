"""Latency checks: absolute maxima and per-group comparison with the baseline."""

from __future__ import annotations

import math
from collections.abc import Iterable

from rageval_pipeline.core.gate.evaluation import EPS, Evaluation
from rageval_pipeline.core.gate.models import LATENCY_STATS, OVERALL, Baseline, Check


def _groups(groups: Iterable[str]) -> list[str]:
    """Latency groups with the overall group first, the rest sorted."""
    return sorted(groups, key=lambda g: (g != OVERALL, g))


def latency_max_checks(run: Evaluation) -> list[Check]:
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


# Fewer timings than this never block, whatever the percentile: with 23 beir-mini queries on a
# loaded machine, an unchanged system's p50 over a 3-query intent bucket came out 2.25x the same
# configuration's timed beside it (interleaved ABBA), which the whole run showed to be load.
MIN_TIMINGS = 10


def too_few_for(stat: str, n_queries: int | None) -> bool:
    """Whether `n_queries` timings are too few for percentile `stat` to block a release.

    The q-th percentile of fewer than 1 / (1 - q) values (20 for p95, 100 for p99) is
    interpolated between the largest values, so one slow query decides it: on an intent
    bucket of ten queries, p95 is in effect the maximum. Below MIN_TIMINGS, even the median is
    one or two queries' scheduling. Such a comparison is reported as advisory. Unknown counts
    (summaries stored before they were kept) stay blocking.
    """
    if n_queries is None or not stat.startswith("p"):
        return False
    needed = max(math.ceil(1 / (1 - float(stat[1:]) / 100) - EPS), MIN_TIMINGS)
    return n_queries < needed


def _reference(run: Evaluation, baseline: Baseline) -> tuple[dict, str, bool]:
    """What the run's latency is compared with: (group -> stat -> ms, where it was timed,
    whether a rise may block).

    Milliseconds are only comparable when taken on the same machine under the same load: the
    baseline's configuration timed side by side with the run (built-in systems), else the
    baseline's own figures, blocking only when they were timed on the same hardware."""
    if run.summary.baseline_latency:
        return run.summary.baseline_latency, "the baseline configuration timed in this run", True
    same = run.summary.machine is not None and run.summary.machine == baseline.machine
    where = "the baseline" + ("" if same else " (timed on another machine: advisory)")
    return baseline.latency, where, same


def latency_baseline_checks(run: Evaluation, baseline: Baseline) -> list[Check]:
    tolerance = run.rules.latency_tolerance
    baseline_latency, where, may_block = _reference(run, baseline)
    checks = []
    shared = set(run.summary.latency) & set(baseline_latency)
    for group in _groups(g for g in shared if tolerance.compares(g)):
        ours, theirs = run.summary.latency[group], baseline_latency[group]
        n_queries = run.summary.latency_queries.get(group)
        for stat in tolerance.stats:
            if stat not in ours or stat not in theirs:
                continue
            value, reference = ours[stat], theirs[stat]
            passed = not (
                value > reference * (1 + tolerance.relative) + EPS
                and value - reference > tolerance.floor_ms + EPS
            )
            bound = (
                f"{where} {reference:.1f} ms + {tolerance.relative * 100:g}% and "
                f"+ {tolerance.floor_ms:g} ms"
            )
            few = too_few_for(stat, n_queries)
            if few:
                bound += f"; advisory: {stat} of only {n_queries} queries"
            checks.append(
                run.compared(
                    kind="latency_baseline",
                    measure=stat,
                    group=group,
                    value=value,
                    reference=reference,
                    passed=passed,
                    blocking=may_block and not few,
                    # An advisory comparison establishes nothing: no taxonomy label.
                    category="latency_regression" if may_block and not few else None,
                    unit=" ms",
                    message=f"{run.label} latency {stat} [{group}] = {value:.1f} ms "
                    f"{'within' if passed else '>'} {bound}",
                )
            )
    return checks
