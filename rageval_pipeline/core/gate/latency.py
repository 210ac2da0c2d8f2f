"""Latency checks: absolute maxima and per-group comparison with the baseline.

A rise against the baseline's configuration timed beside the run blocks only when the
interleaved pairs establish it (`paired_rise`): a loaded machine slows both timings of a pair,
so the per-query ratio stays near 1 for unchanged code while the percentiles of the two sides,
taken over different moments of the load, drift apart (at load 21-30 on 2 cores an unchanged
dense system's p50 [intent=factual] came out 608 ms against 290 ms). False alarms measured
with CPU hogs: bench/latency_noise.py, bench/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

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


def exceeds(value: float, reference: float, relative: float, floor_ms: float) -> bool:
    """Whether `value` ms rose beyond `reference` by more than `relative` and `floor_ms`."""
    return value > reference * (1 + relative) + EPS and value - reference > floor_ms + EPS


def paired_rise(pairs: Mapping[str, float] | None, relative: float) -> tuple[bool, str] | None:
    """(established, why) from a group's interleaved pairs (`aggregate.PAIRED_STATS`): a rise
    is established when the 95% lower bound of the per-query ratio system / baseline exceeds
    1 + `relative`. None without MIN_TIMINGS pairs: then the percentiles decide, as before."""
    if not pairs or pairs.get("pairs", 0) < MIN_TIMINGS:
        return None
    low, median = pairs["ratio_low"], pairs["ratio_p50"]
    established = low > 1 + relative + EPS
    why = (
        f"the per-query ratio over {pairs['pairs']:.0f} interleaved pairs is x{median:.2f} "
        f"(95% lower bound x{low:.2f}, {'beyond' if established else 'within'} "
        f"+{relative * 100:g}%)"
    )
    return established, why


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
    beside, pairs = bool(run.summary.baseline_latency), run.summary.latency_pairs
    checks = []
    shared = set(run.summary.latency) & set(baseline_latency)
    for group in _groups(g for g in shared if tolerance.compares(g)):
        ours, theirs = run.summary.latency[group], baseline_latency[group]
        n_queries = run.summary.latency_queries.get(group)
        for stat in tolerance.stats:
            if stat not in ours or stat not in theirs:
                continue
            value, reference = ours[stat], theirs[stat]
            passed = not exceeds(value, reference, tolerance.relative, tolerance.floor_ms)
            bound = (
                f"{where} {reference:.1f} ms + {tolerance.relative * 100:g}% and "
                f"+ {tolerance.floor_ms:g} ms"
            )
            few = too_few_for(stat, n_queries)
            if few:
                bound += f"; advisory: {stat} of only {n_queries} queries"
            paired = (
                None if passed or not beside else paired_rise(pairs.get(group), tolerance.relative)
            )
            noise = paired is not None and not paired[0]
            if paired is not None:
                bound += f"; {'inconclusive: ' if noise else ''}{paired[1]}"
            checks.append(
                run.compared(
                    kind="latency_baseline",
                    measure=stat,
                    group=group,
                    value=value,
                    reference=reference,
                    passed=passed,
                    blocking=may_block and not few and not noise,
                    # An advisory comparison establishes nothing: no taxonomy label.
                    category="latency_regression" if may_block and not few and not noise else None,
                    inconclusive=noise,
                    unit=" ms",
                    message=f"{run.label} latency {stat} [{group}] = {value:.1f} ms "
                    f"{'within' if passed else '>'} {bound}",
                )
            )
    return checks
