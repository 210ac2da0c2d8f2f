"""The policy's rule kinds: each is the model of its parameters in `gate.yaml` and judges a run.

A rule kind is one class here: its `kind` (the name `gate.yaml` writes), its parameters, and
`check(run)`, which returns the run's check. The policy model (`core/gate/policy.py`) lists the
kinds in `AnyRule`; the judge calls `check` on every rule of a dataset's `rules` (the release)
and `validation` (the validation report) lists. A new kind is a class here and a name in `AnyRule`,
nothing else (docs/gate.md, "Adding a rule kind").
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, FiniteFloat

from rageval_pipeline.core.gate.models import (
    OVERALL,
    RULE_CHECK_KINDS,
    Check,
    LatencyStat,
    _Strict,
)
from rageval_pipeline.core.gate.run import Run
from rageval_pipeline.core.gate.taxonomy import category_of
from rageval_pipeline.core.measures.names import Measure, MeasureField

IntegrityRate = Literal["metadata_completeness", "hash_validation"]
INTEGRITY_RATES: tuple[IntegrityRate, ...] = ("metadata_completeness", "hash_validation")


class Rule(_Strict):
    """One pass/fail rule. `blocking: false` reports a failure without failing on it."""

    kind: str
    blocking: bool = True

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        RULE_CHECK_KINDS.add(cls.model_fields["kind"].default)

    def check(self, run: Run) -> Check:
        raise NotImplementedError


def measure_limit(run: Run, measure: Measure, limit: float, blocking: bool) -> Check:
    """`measure` against an absolute minimum (maximum when lower is better): a blocking
    `threshold`, else an advisory `target`. A measure the run did not compute fails."""
    kind, name = "threshold" if blocking else "target", str(measure)
    value = run.summary.measures.get(name)
    if value is None:
        return run.check(
            kind=kind,
            measure=name,
            reference=limit,
            passed=False,
            blocking=blocking,
            message=f"{run.label} {measure} was not computed by this run but the policy has a "
            f"{kind} for it",
        )
    higher = measure.higher_is_better
    passed = value >= limit if higher else value <= limit
    relation = (">=" if passed else "<") if higher else ("<=" if passed else ">")
    check = run.compared(
        kind=kind,
        measure=name,
        value=value,
        reference=limit,
        passed=passed,
        blocking=blocking,
        # A missed advisory target is not a regression: it carries no taxonomy label.
        category=category_of(measure) if blocking else None,
        message=f"{run.label} {measure} = {value:.4f} {relation} {kind} {limit:.4f}",
    )
    if blocking or passed:
        return check
    return check.model_copy(update={"message": check.message + " (advisory)"})


class Threshold(Rule):
    """The run's mean `measure` is at least `min` (at most, when lower is better). The policy's
    `thresholds` are blocking ones, its `targets` advisory ones."""

    kind: Literal["threshold"] = "threshold"
    measure: MeasureField
    min: FiniteFloat

    def check(self, run: Run) -> Check:
        return measure_limit(run, self.measure, self.min, self.blocking)


class QueryShare(Rule):
    """At least `share` of the queries reach `min` on `measure` (at most `min`, when lower is
    better); a query without the measure does not reach it. The validation report's: 80% of the
    queries have P@5 >= 0.80."""

    kind: Literal["query_share"] = "query_share"
    measure: MeasureField
    min: FiniteFloat
    share: float = Field(ge=0, le=1)

    @property
    def relation(self) -> str:
        """How a query's value must compare with `min`."""
        return ">=" if self.measure.higher_is_better else "<="

    def check(self, run: Run) -> Check:
        name = str(self.measure)
        values = [q.get(name) for q in run.summary.per_query.values()]
        at_least = self.relation == ">="
        good = sum(v is not None and (v >= self.min if at_least else v <= self.min) for v in values)
        share = good / len(values) if values else 0.0
        passed = share >= self.share
        return run.compared(
            kind=self.kind,
            measure=name,
            value=share,
            reference=self.share,
            ci_low=None,
            ci_high=None,
            passed=passed,
            blocking=self.blocking,
            category=category_of(self.measure) if self.blocking else None,
            message=f"{run.label} {good}/{len(values)} queries ({share:.0%}) have "
            f"{self.measure} {self.relation} {self.min:g}, "
            f"{'>=' if passed else '<'} {self.share:.0%} required",
        )


class LatencyBelow(Rule):
    """The overall latency statistic `stat` is below `ms`, strictly (the validation report's:
    p95 < 2000 ms; `latency_max_ms` allows the limit itself). An unmeasured statistic fails."""

    kind: Literal["latency_below"] = "latency_below"
    stat: LatencyStat
    ms: float = Field(gt=0)

    def check(self, run: Run) -> Check:
        value = run.summary.latency.get(OVERALL, {}).get(self.stat)
        about = f"{run.label} latency {self.stat} [{OVERALL}]"
        fields = dict(kind="latency", measure=self.stat, group=OVERALL, blocking=self.blocking)
        if value is None:
            return run.check(
                **fields,
                reference=self.ms,
                passed=False,
                message=f"{about} was not measured but the policy limits it",
            )
        passed = value < self.ms
        return run.compared(
            **fields,
            value=value,
            reference=self.ms,
            passed=passed,
            category="latency_regression" if self.blocking else None,
            unit=" ms",
            message=f"{about} = {value:.1f} ms {'<' if passed else '>='} {self.ms:g} ms",
        )


class Integrity(Rule):
    """The run's chunks reach `min` on `rate`: metadata_completeness (all six metadata fields
    filled) or hash_validation (the stored content hash matches the text), as the `chunks`
    asset's checks measure them. A run without chunks (run files, services) is not judged."""

    kind: Literal["integrity"] = "integrity"
    rate: IntegrityRate
    min: float = Field(default=1.0, ge=0, le=1)

    def check(self, run: Run) -> Check:
        value = None if run.integrity is None else run.integrity.get(self.rate)
        about = f"{run.label} {self.rate.replace('_', ' ')}"
        if value is None:
            return run.check(
                kind=self.kind,
                measure=self.rate,
                reference=self.min,
                passed=True,
                blocking=False,
                message=f"{about} not measured for this run (no chunks): not judged",
            )
        passed = value >= self.min
        return run.compared(
            kind=self.kind,
            measure=self.rate,
            value=value,
            reference=self.min,
            passed=passed,
            blocking=self.blocking,
            category=None,  # damaged chunks are an ingestion fault, not a retrieval regression
            message=f"{about} rate {value:.2%} {'>=' if passed else '<'} {self.min:.0%}",
        )
