"""One run under judgement with its dataset's rules, and the per-query helpers its checks share."""

from __future__ import annotations

from dataclasses import dataclass

from rageval_pipeline.core.gate.decision import EPS
from rageval_pipeline.core.gate.models import Baseline
from rageval_pipeline.core.gate.policy import GateRules
from rageval_pipeline.core.gate.run import Run
from rageval_pipeline.core.measures.names import Measure

__all__ = ["EPS", "Evaluation", "per_query_pairs", "worsening"]


@dataclass(frozen=True)
class Evaluation(Run):
    """One run with the policy rules of its dataset."""

    rules: GateRules


def per_query_pairs(
    run: Evaluation, baseline: Baseline, measure: Measure
) -> list[tuple[str, float, float]]:
    """(query_id, baseline value, run value) for queries measured in both, by query id."""
    ours, name = run.summary.per_query, str(measure)
    return [
        (qid, values[name], ours[qid][name])
        for qid, values in sorted(baseline.per_query.items())
        if name in values and name in ours.get(qid, {})
    ]


def worsening(measure: Measure, reference: float, value: float) -> float:
    return reference - value if measure.higher_is_better else value - reference
