"""The run against its baseline's anchor (core/gate/lineage.py), with the cumulative band.

A baseline update within the band passes, so a chain of them could walk the baseline down one
step at a time. Each run is therefore also compared, on its primary measure and with the same
paired statistics and rule, with the anchor its baseline carries, the band widened to
`anchor.factor` times its own: a chain of steps of -0.5 x band blocks by the 4th step at the
default factor 2 (bench/anchor_chain.py).
"""

from __future__ import annotations

from rageval_pipeline.core.gate.evaluation import Evaluation
from rageval_pipeline.core.gate.lineage import Anchor
from rageval_pipeline.core.gate.models import Baseline, Check
from rageval_pipeline.core.gate.policy import Band, GateRules
from rageval_pipeline.core.gate.quality import baseline_check, paired_tests
from rageval_pipeline.core.gate.unchanged import MIN_UNCHANGED, narrowed, suite_diff
from rageval_pipeline.core.measures.names import Measure


def _scaled(band: Band, factor: float) -> dict:
    return {
        "relative": None if band.relative is None else band.relative * factor,
        "absolute": None if band.absolute is None else band.absolute * factor,
    }


def cumulative(rules: GateRules) -> GateRules:
    """`rules` with every band (the default and each measure's) widened by `anchor.factor`."""
    factor = rules.anchor.factor
    tolerance = rules.tolerance
    wide = tolerance.model_copy(
        update={
            **_scaled(tolerance, factor),
            "per_measure": {
                m: b.model_copy(update=_scaled(b, factor)) for m, b in tolerance.per_measure.items()
            },
        }
    )
    return rules.model_copy(update={"tolerance": wide})


def as_baseline(anchor: Anchor, stored: Baseline) -> Baseline:
    """The anchor in the shape the quality checks read (its values, the stored one's names)."""
    return stored.model_copy(
        update={
            "measures": anchor.measures,
            "per_query": anchor.per_query,
            "intervals": {},
            "fingerprint": anchor.fingerprint,
            "suite": anchor.suite,
            "query_digests": anchor.query_digests,
            "top": {},
        }
    )


def anchor_check(run: Evaluation, stored: Baseline, primary: Measure) -> Check | None:
    """The primary measure against the anchor with the cumulative band; None when the baseline
    is its own anchor, or lacks the measure. An anchor of another suite version is compared on
    the queries whose digests are unchanged (`unchanged`); with fewer than MIN_UNCHANGED of
    them it cannot be, and the check blocks saying so: a chain of updates across suite
    versions would otherwise walk the baseline down with no anchor holding it."""
    anchor = stored.anchor
    if anchor is None or str(primary) not in anchor.measures:
        return None
    if run.rules.statistics.rule == "ppi":
        return None  # the anchor keeps no LLM-judged population to pair with
    reference, summary = as_baseline(anchor, stored), run.summary
    pinned = "pinned anchor" if anchor.pinned else "anchor"
    which = f"its {pinned}, the baseline of {anchor.recorded_at[:10]} (run {anchor.source_run_id})"
    if anchor.suite is not None and anchor.suite != summary.suite:
        kept = suite_diff(summary, reference).unchanged if anchor.query_digests else []
        if len(kept) < MIN_UNCHANGED:
            return _unanchored(run, primary, which, len(kept), bool(anchor.query_digests))
        reference = narrowed(reference, kept, summary.suite)
        summary = narrowed(summary, kept, summary.suite)
    wide = Evaluation(summary, cumulative(run.rules), integrity=run.integrity)
    test = paired_tests(wide, reference, [primary]).get(primary)
    check = baseline_check(wide, primary, reference, test)
    words = f"against {which}, with the cumulative band ({run.rules.anchor.factor:g}x): "
    return check.model_copy(
        update={"kind": "anchor", "improved": False, "message": words + check.message}
    )


def _unanchored(run: Evaluation, primary: Measure, which: str, kept: int, digests: bool) -> Check:
    """The `anchor` check of an anchor the suite changed under, which cannot be compared, so
    nothing holds the chain of baselines across the change: blocking when its digests show
    too few unchanged queries; a warning when it recorded none (an anchor recorded before
    they were kept: how many are unchanged is unknown, as a baseline without a suite digest
    is taken as comparable)."""
    update = run.update_command("--pin-anchor")
    if digests:
        why = f"only {kept} of its queries are unchanged (at least {MIN_UNCHANGED} needed)"
        then = f"the gate blocks. Review the run on this suite and re-anchor: {update} "
        then += "--accept-worse '<why>'"
    else:
        why = "it recorded no per-query digests (recorded before they were kept)"
        then = f"this warns (not blocking). Re-anchor on this suite once reviewed: {update}"
    return run.check(
        kind="anchor",
        measure=str(primary),
        passed=False,
        blocking=digests,
        message=f"{run.label} {primary} cannot be compared with {which}: it was measured on "
        f"another suite version and {why}, so the cumulative band cannot hold the chain of "
        f"baselines across the change and {then}",
    )
