"""Retrieval quality against the baseline: the checks of compared and watched measures, spikes.

Each measure's PASS / FAIL / INCONCLUSIVE is `core.gate.decision.judge` (the rule, its
statistics and its power live there); this module turns it into the check a report shows. When
the run retrieves documents nobody judged (unjudged_spike), the drops of the standard measures
are reported under that label instead of their own (core/gate/coverage.py).
"""

from __future__ import annotations

import numpy as np

from rageval_pipeline.core.gate.comparable import Comparability
from rageval_pipeline.core.gate.decision import (
    MIN_PASS_QUERIES,
    Judgement,
    Statistics,
    floor_gap,
    judge,
    resolution,
    resolution_text,
    tests,
)
from rageval_pipeline.core.gate.evaluation import (
    EPS,
    Evaluation,
    per_query_pairs,
    uncounted,
    worsening,
)
from rageval_pipeline.core.gate.models import Baseline, Check, QueryRegression
from rageval_pipeline.core.gate.ppi_rule import measured_on_population, ppi_tests
from rageval_pipeline.core.gate.run import deltas
from rageval_pipeline.core.gate.taxonomy import category_of
from rageval_pipeline.core.measures.defaults import primary_measure
from rageval_pipeline.core.measures.names import Measure, parse_measure, sort_key
from rageval_pipeline.core.statistics.paired import PairedTest, with_holm


def _shared(
    run: Evaluation, baseline: Baseline, besides: list[Measure], skip: tuple[str, ...]
) -> list[Measure]:
    """The measures both stored (names parsed here, once) but `besides`, in name order, with
    the families in `skip` left out."""
    names = set(run.summary.measures) & set(baseline.measures) - {str(m) for m in besides}
    parsed = (parse_measure(name) for name in sorted(names, key=sort_key))
    return [m for m in parsed if m.family not in skip]


def compared_measures(run: Evaluation, baseline: Baseline) -> list[Measure]:
    """The candidates: `compare` when set, else every measure in both run and baseline except
    coverage (Judged@k), which the unjudged check compares instead, and budget (Tokens@k): a
    chunking that pays more context for better recall is a trade-off to watch, not a failure.
    Without `compare` only the primary one of them decides (`decided_measures`)."""
    if run.rules.compare is not None:
        return list(run.rules.compare)
    return _shared(run, baseline, [], skip=("coverage", "budget"))


def decided_measures(
    run: Evaluation, baseline: Baseline, comparable: Comparability
) -> tuple[list[Measure], Measure | None]:
    """The measures that decide the run, and its primary measure (`primary_measure`: nDCG@10,
    or the evidence at the first token budget after a chunking change). Without `compare`
    the primary measure alone decides and the others are watched: a run's harmless-change PASS
    rate is the product of its blocking checks', so eleven of them would block a resolved
    change most of the time."""
    candidates = comparable.compared(compared_measures(run, baseline))
    primary = primary_measure(candidates, comparable.primary(run.rules.spike.measure))
    if run.rules.compare is None and primary is not None:
        return [primary], primary
    return candidates, primary


def watched_measures(run: Evaluation, baseline: Baseline, compared: list[Measure]) -> list[Measure]:
    """Every other measure both have (coverage aside): each is watched, and a drop that the
    statistics establish is a warning under its own category, so a collapse of R@100 is seen
    even when the policy blocks on nDCG@10 alone."""
    return _shared(run, baseline, compared, skip=("coverage",))


def paired_tests(
    run: Evaluation, baseline: Baseline, measures: list[Measure]
) -> dict[Measure, PairedTest]:
    """Run against baseline per measure on the queries both measured, decided together
    (core/gate/decision.py: Bonferroni-widened intervals for FAIL claims, Holm-adjusted
    p-values); under rule `ppi`, the PPI++ paired deltas on the whole population for the
    measures it was measured with (the others, such as span measures, on the suite's queries)."""
    stats = run.rules.statistics
    ppi: list[Measure] = []
    if stats.rule == "ppi":
        population = measured_on_population(run.summary)
        ppi = [m for m in measures if str(m) in population]
    values = {}
    for measure in measures:
        if measure in ppi:
            continue
        pairs = per_query_pairs(run, baseline, measure)
        if len(pairs) < 2 or uncounted(run, baseline, measure):
            continue  # no per-query values (an old baseline): the mean alone decides
        _, reference, value = zip(*pairs, strict=True)
        values[measure] = (np.array(reference), np.array(value))
    family = len(ppi) + len(values)
    found = ppi_tests(run, baseline, ppi, family) if ppi else {}
    return with_holm({**found, **tests(values, stats, family=family)})


def _stats_text(run: Evaluation, measure: Measure, test: PairedTest | None) -> str:
    if test is None:
        return ""
    level = 1 - run.rules.statistics.alpha
    ppi = run.rules.statistics.rule == "ppi" and str(measure) in measured_on_population(run.summary)
    text = f"; {'PPI++ ' if ppi else ''}paired delta {test.delta:+.4f} over {test.n} queries"
    text += " (LLM-judged, bias corrected on the random human sample)" if ppi else ""
    if test.ci_low is not None and test.ci_high is not None:
        text += f", {level:.0%} CI [{test.ci_low:+.4f}, {test.ci_high:+.4f}]"
    if test.p_holm is not None:
        text += f", p = {test.p_holm:.3g} (Holm)"
    return text


def baseline_check(
    run: Evaluation, measure: Measure, baseline: Baseline, test: PairedTest | None
) -> Check:
    name = str(measure)
    value = run.summary.measures.get(name)
    reference = baseline.measures.get(name)
    if value is None or reference is None:
        # A measure the run lacks can hide a regression; one the baseline lacks cannot.
        missing_in_run = value is None
        return run.check(
            kind="baseline",
            measure=str(measure),
            value=value,
            reference=reference,
            passed=False,
            blocking=missing_in_run,
            message=f"{run.label} {measure} is compared with the baseline but was not computed "
            "by this run"
            if missing_in_run
            else f"{run.label} {measure} is not in the baseline; update the baseline to compare it",
        )
    if uncounted(run, baseline, measure):
        return _not_comparable(run, measure, baseline, "baseline", blocking=True)
    band = run.rules.tolerance.for_measure(measure)
    allowed = band.allowed(reference)
    stats = run.rules.statistics
    verdict = judge(measure.higher_is_better, value - reference, test, allowed, stats)
    res = resolution(test, allowed, stats)
    if res is not None and test is not None and verdict.floor:
        res = res.model_copy(update={"floor": floor_gap(test)})
    higher = measure.higher_is_better
    beyond = worsening(measure, reference, value) > allowed + EPS
    relation = "within" if not beyond else ("<" if higher else ">")
    bound = f"baseline {reference:.4f} {'-' if higher else '+'} {band.describe(reference)}"
    unsure = verdict.outcome == "inconclusive"
    prefix = "inconclusive: " if unsure else ""
    check = run.compared(
        kind="baseline",
        measure=str(measure),
        value=value,
        reference=reference,
        passed=verdict.outcome == "pass",
        blocking=verdict.blocks,
        category=category_of(measure) if verdict.outcome == "fail" else None,
        message=f"{prefix}{run.label} {measure} = {value:.4f} {relation} {bound}",
        paired=test,
        inconclusive=unsure,
        improved=verdict.improved,
        resolution=res,
    )
    text = _stats_text(run, measure, test)
    if test is None and beyond:
        text = "; no per-query values in both run and baseline, so the mean alone decides"
    if unsure:
        text += _unsure_text(verdict, test, allowed, stats)
    if res is not None and not res.resolves and not verdict.floor:
        text += "; " + resolution_text(res)
    return check.model_copy(update={"message": check.message + text})


def _not_comparable(
    run: Evaluation, measure: Measure, baseline: Baseline, kind: str, *, blocking: bool
) -> Check:
    """A cost measure (`uncounted`) the run has no value for on some of the baseline's
    queries: refused, since a dropped query would read as the cheapest."""
    dropped = uncounted(run, baseline, measure)
    shown = ", ".join(dropped[:5]) + (", ..." if len(dropped) > 5 else "")
    return run.check(
        kind=kind,
        measure=str(measure),
        value=run.summary.measures.get(str(measure)),
        reference=baseline.measures.get(str(measure)),
        passed=False,
        blocking=blocking,
        message=f"{run.label} {measure} is not comparable with the baseline: the run has no "
        f"value for {len(dropped)} of the baseline's queries ({shown}); a cost has no worst "
        "value to count a dropped query at, and leaving it out would read as a saving"
        + ("" if blocking else " (watched, not blocking)"),
    )


def _unsure_text(
    verdict: Judgement, test: PairedTest | None, band: float, stats: Statistics
) -> str:
    """Why an inconclusive measure was not passed, and whether it blocks."""
    does = "blocking" if verdict.blocks else "not blocking"
    blocking = f"{does}: statistics.inconclusive: {stats.inconclusive}"
    mean_within = stats.mean_within
    if verdict.floor and test is not None:
        more = floor_gap(test)
        return (
            f": the interval rules out a drop beyond the band ({band:.4f}), but the query floor "
            f"decided: below {MIN_PASS_QUERIES} paired queries only an unmoved system passes "
            f"(the interval runs narrow there); {more} more "
            f"{'query lifts' if more == 1 else 'queries lift'} the floor ({blocking})"
        )
    if verdict.off_centre and test is not None:
        return (
            f": the interval rules out a drop beyond the band ({band:.4f}), but the mean drop "
            f"({test.delta:+.4f}) uses more than {mean_within:.0%} of it: on skewed per-query "
            f"differences a sample can miss the few queries that lose most, so a narrow "
            f"interval there is not trusted ({blocking})"
        )
    if verdict.likely:
        return (
            f": the drop is likely, beyond the band ({band:.4f}) with an interval that excludes "
            f"0, though not established beyond the band ({blocking})"
        )
    return (
        f": the interval reaches past the band ({band:.4f}), so this suite cannot tell "
        f"whether the drop is within it ({blocking})"
    )


def watched_check(
    run: Evaluation, measure: Measure, baseline: Baseline, test: PairedTest | None
) -> Check:
    """A measure outside `compare`, judged by the same rule but never blocking: a warning,
    under the measure's own category, when a drop beyond tolerance is established (FAIL);
    otherwise passed (and `improved` when a gain is established)."""
    if uncounted(run, baseline, measure):
        return _not_comparable(run, measure, baseline, "watched", blocking=False)
    name = str(measure)
    value, reference = run.summary.measures[name], baseline.measures[name]
    allowed = run.rules.tolerance.for_measure(measure).allowed(reference)
    verdict = judge(
        measure.higher_is_better, value - reference, test, allowed, run.rules.statistics
    )
    fell = verdict.outcome == "fail"
    relation = "fell beyond" if fell else ("rose beyond" if verdict.improved else "within")
    check = run.compared(
        kind="watched",
        measure=str(measure),
        value=value,
        reference=reference,
        passed=not fell,
        blocking=False,
        category=category_of(measure),
        message=f"{run.label} {measure} = {value:.4f} {relation} tolerance of the baseline "
        f"{reference:.4f} (watched, not blocking)",
        paired=test,
        improved=verdict.improved,
    )
    return check.model_copy(update={"message": check.message + _stats_text(run, measure, test)})


def side_gains_withheld(compared: list[Check], watched: list[Check]) -> list[Check]:
    """`watched` with no side measure (diversity, clustering, token cost: no qrels) marked
    improved while a compared measure did not pass: fewer tokens or more sources are no gain
    when relevance fell or cannot be told from a drop."""
    if all(c.passed for c in compared if c.kind == "baseline"):
        return watched
    return [
        c.model_copy(update={"improved": False})
        if c.improved and not parse_measure(c.measure or "").USES_QRELS
        else c
        for c in watched
    ]


def spike_check(run: Evaluation, baseline: Baseline, measure: Measure) -> Check:
    spike = run.rules.spike
    pairs = per_query_pairs(run, baseline, measure)
    if not pairs:
        return run.check(
            kind="spike",
            measure=str(measure),
            passed=True,
            blocking=False,
            message=f"{run.label} {measure}: no per-query values in both the run and the "
            "baseline, so the spike check was skipped",
        )
    dropped = sum(worsening(measure, ref, val) > spike.drop + EPS for _, ref, val in pairs)
    share = dropped / len(pairs)
    passed = share <= spike.share + EPS
    relation = "<=" if passed else ">"
    delta, relative = deltas(share, spike.share)
    return run.check(
        kind="spike",
        measure=str(measure),
        value=share,
        reference=spike.share,
        delta=delta,
        relative_delta=relative,
        ci_low=None,
        ci_high=None,
        passed=passed,
        blocking=True,
        category=None if passed else "semantic_degraded_spike",
        message=f"{run.label} {measure} worsened by more than {spike.drop:g} on {dropped} of "
        f"{len(pairs)} queries ({share:.1%} {relation} {spike.share:.1%} allowed)",
    )


def worst_queries(
    run: Evaluation, baseline: Baseline, measure: Measure, limit: int
) -> list[QueryRegression]:
    # A dropped query of a cost has no value to show (`uncounted`: its check names it).
    worse = [
        (worsening(measure, ref, val), qid, ref, val)
        for qid, ref, val in per_query_pairs(run, baseline, measure)
        if np.isfinite(val)
    ]
    worse = sorted((w for w in worse if w[0] > EPS), key=lambda w: (-w[0], w[1]))
    s = run.summary
    return [
        QueryRegression(
            dataset=s.dataset,
            split=s.split,
            system=s.system,
            query_id=qid,
            measure=str(measure),
            baseline=ref,
            value=val,
            delta=val - ref,
        )
        for _, qid, ref, val in worse[:limit]
    ]
