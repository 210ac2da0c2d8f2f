"""One run under judgement: its summary, its rules, and how its checks are built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rageval_pipeline.core.gate.models import Baseline, Category, Check, RunSummary
from rageval_pipeline.core.gate.policy import GateRules
from rageval_pipeline.core.measures.names import parse_measure

# Values read back from 6-decimal baselines must not fail a comparison that sits on the boundary.
EPS = 1e-9


def deltas(value: float, reference: float) -> tuple[float, float | None]:
    delta = value - reference
    return delta, (delta / reference if reference else None)


def _delta_text(delta: float, relative: float | None, unit: str = "") -> str:
    digits = ".1f" if unit else ".4f"
    text = f"delta {delta:+{digits}}{unit}"
    return text + (f", {relative:+.1%}" if relative is not None else "")


@dataclass(frozen=True)
class Evaluation:
    """One run summary with the policy rules of its dataset."""

    summary: RunSummary
    rules: GateRules

    @property
    def label(self) -> str:
        return f"{self.summary.dataset}/{self.summary.system}"

    def check(self, **fields: Any) -> Check:
        """A check of this run; a measure's check carries the interval of the run's mean."""
        s = self.summary
        interval = s.intervals.get(fields.get("measure") or "")
        if interval is not None and "ci_low" not in fields:
            fields |= {"ci_low": interval[0], "ci_high": interval[1]}
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
        delta, relative = deltas(value, reference)
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


def per_query_pairs(
    run: Evaluation, baseline: Baseline, measure: str
) -> list[tuple[str, float, float]]:
    """(query_id, baseline value, run value) for queries measured in both, by query id."""
    ours = run.summary.per_query
    return [
        (qid, values[measure], ours[qid][measure])
        for qid, values in sorted(baseline.per_query.items())
        if measure in values and measure in ours.get(qid, {})
    ]


def worsening(measure: str, reference: float, value: float) -> float:
    return reference - value if parse_measure(measure).higher_is_better else value - reference
