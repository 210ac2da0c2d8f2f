"""Where a baseline update leaves the lineage and the anchor (core/gate/lineage.py), and the
primary measure's paired loss that refuses a worse baseline.

The anchor moves to the new baseline only when it is no worse than the anchor on the primary
measure and was not accepted as worse; a pinned anchor stays until another pin. So steps that
each pass within the band keep the anchor where the chain started, and the gate's cumulative
band (`core/gate/anchoring.py`) stops the chain before it adds up.
"""

from __future__ import annotations

import numpy as np

from rageval_pipeline.core.gate.evaluation import EPS, Evaluation, per_query_pairs, worsening
from rageval_pipeline.core.gate.lineage import Anchor, Lineage
from rageval_pipeline.core.gate.models import Baseline
from rageval_pipeline.core.gate.policy import GateRules
from rageval_pipeline.core.gate.quality import compared_measures
from rageval_pipeline.core.gate.unchanged import suite_diff
from rageval_pipeline.core.measures.defaults import primary_measure
from rageval_pipeline.core.measures.names import Measure
from rageval_pipeline.core.statistics.paired import paired_test


def _primary(run: Evaluation, old: Baseline) -> Measure | None:
    return primary_measure(compared_measures(run, old), run.rules.spike.measure)


def primary_loss(run: Evaluation, old: Baseline) -> str:
    """The primary measure's loss from `old` to the run on the queries both measured, when
    its paired mean falls beyond the band ("" otherwise), with the paired interval."""
    measure = _primary(run, old)
    if measure is None:
        return ""
    pairs = per_query_pairs(run, old, measure)
    if run.summary.query_digests and old.query_digests:  # another suite version: unchanged ones
        kept = set(suite_diff(run.summary, old).unchanged)
        pairs = [p for p in pairs if p[0] in kept]
    if len(pairs) < 2:
        return ""
    before = np.array([b for _, b, _ in pairs], dtype=float)
    after = np.array([a for _, _, a in pairs], dtype=float)
    reference, value = float(before.mean()), float(after.mean())
    allowed = run.rules.tolerance.for_measure(measure).allowed(reference)
    if worsening(measure, reference, value) <= allowed + EPS:
        return ""
    stats = run.rules.statistics
    test = paired_test(before, after, resamples=stats.resamples, seed=stats.seed, alpha=stats.alpha)
    return (
        f"{measure} on the {len(pairs)} unchanged queries both measured: {reference:.4f} -> "
        f"{value:.4f}, paired delta {test.delta:+.4f} [{test.ci_low:+.4f}, "
        f"{test.ci_high:+.4f}], beyond the band {allowed:.4f}"
    )


def snapshot(baseline: Baseline, *, pinned: bool = False) -> Anchor:
    """`baseline` as an anchor: its means, per-query values and suite."""
    return Anchor(
        recorded_at=baseline.recorded_at,
        source_run_id=baseline.source_run_id,
        fingerprint=baseline.fingerprint,
        measures=dict(baseline.measures),
        per_query={q: dict(v) for q, v in baseline.per_query.items()},
        suite=baseline.suite,
        query_digests=dict(baseline.query_digests),
        accepted_worse=baseline.accepted_worse,
        pinned=pinned,
    )


def _no_worse(new: Baseline, anchor: Anchor, rules: GateRules) -> bool:
    """`new` is at least as good as `anchor` on the primary measure (paired, else by mean)."""
    held = anchor.model_dump(include={"measures", "per_query", "suite", "fingerprint"})
    reference = new.model_copy(update=held)
    run = Evaluation(new, rules)  # type: ignore[arg-type] - a baseline reads as a summary here
    measure = _primary(run, reference)
    if measure is None or str(measure) not in anchor.measures:
        return True
    pairs = per_query_pairs(run, reference, measure)
    if len(pairs) >= 2 and anchor.suite == new.suite:
        before = float(np.mean([b for _, b, _ in pairs]))
        after = float(np.mean([a for _, _, a in pairs]))
    else:
        before, after = anchor.measures[str(measure)], new.measures[str(measure)]
    return worsening(measure, before, after) <= EPS


def lineage(
    new: Baseline, old: Baseline | None, rules: GateRules, *, accepted: str | None, pin: bool
) -> dict:
    """The fields `new` records: why it was accepted as worse (`accepted`), the baseline it
    replaced, and its anchor (None: itself)."""
    fields: dict = {"accepted_worse": accepted}
    if pin:
        return fields | {"anchor": snapshot(new, pinned=True)}
    if old is None:
        return fields | {"anchor": None}
    fields["replaced"] = Lineage(
        recorded_at=old.recorded_at,
        source_run_id=old.source_run_id,
        fingerprint=old.fingerprint,
        measures=dict(old.measures),
        accepted_worse=old.accepted_worse,
    )
    current = old.anchor or snapshot(old)
    moves = accepted is None and not current.pinned and _no_worse(new, current, rules)
    return fields | {"anchor": None if moves else current}
