"""One run under judgement with its dataset's rules, and the per-query helpers its checks share."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rageval_pipeline.core.gate.decision import EPS
from rageval_pipeline.core.gate.models import Baseline
from rageval_pipeline.core.gate.policy import GateRules
from rageval_pipeline.core.gate.run import Run
from rageval_pipeline.core.measures.names import Measure

__all__ = ["EPS", "Evaluation", "per_query_pairs", "uncounted", "worsening"]


@dataclass(frozen=True)
class Evaluation(Run):
    """One run with the policy rules of its dataset."""

    rules: GateRules


def per_query_pairs(
    run: Evaluation, baseline: Baseline, measure: Measure
) -> list[tuple[str, float, float]]:
    """(query_id, baseline value, run value) for every query the baseline measured, by query id.

    A query the run does not answer, or one dropped from its qrels, counts against the run at
    the measure's worst value (0 for higher-is-better; for a cost without a bound, infinity,
    which the quality checks refuse to average: `uncounted`), never out of it: leaving out the
    queries that got worse must not pass. Without any per-query value of the measure in the run
    there is nothing to pair (the mean alone decides)."""
    ours, name = run.summary.per_query, str(measure)
    if not any(name in values for values in ours.values()):
        return []
    worst = 0.0 if measure.higher_is_better else measure.MAX_VALUE
    return [
        (qid, values[name], ours.get(qid, {}).get(name, worst))
        for qid, values in sorted(baseline.per_query.items())
        if name in values
    ]


def uncounted(run: Evaluation, baseline: Baseline, measure: Measure) -> list[str]:
    """The baseline's queries the run has no value of `measure` for, when the measure has no
    worst value to count them at (a cost, such as Tokens@k: unbounded above). Such a run is
    not comparable on it: leaving the query out, or counting it as costing nothing, would
    read a dropped query as a gain."""
    if measure.higher_is_better or math.isfinite(measure.MAX_VALUE):
        return []
    ours, name = run.summary.per_query, str(measure)
    if not any(name in values for values in ours.values()):
        return []  # no per-query values at all: the mean alone decides (`per_query_pairs`)
    return sorted(
        q
        for q, values in baseline.per_query.items()
        if name in values and name not in ours.get(q, {})
    )


def worsening(measure: Measure, reference: float, value: float) -> float:
    return reference - value if measure.higher_is_better else value - reference
