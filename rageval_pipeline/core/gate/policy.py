"""The gate policy (data/gate.yaml): thresholds, targets and tolerances per dataset."""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, FiniteFloat

from rageval_pipeline.core.gate.decision import EPS, Statistics
from rageval_pipeline.core.gate.models import OVERALL, LatencyStat, _Strict
from rageval_pipeline.core.gate.rules import Integrity, LatencyBelow, QueryShare, Rule, Threshold
from rageval_pipeline.core.io.config import load_model
from rageval_pipeline.core.measures.defaults import BUDGETS
from rageval_pipeline.core.measures.names import Measure, MeasureField, OneSpellingEach

_M = TypeVar("_M", bound=BaseModel)
MeasureLimits = Annotated[dict[MeasureField, FiniteFloat], OneSpellingEach]


class Band(_Strict):
    """Allowed worsening against a baseline value: relative and/or absolute; the wider one wins.

    With both unset no worsening at all is allowed.
    """

    relative: float | None = Field(default=0.05, ge=0)
    absolute: float | None = Field(default=None, ge=0)

    def allowed(self, reference: float) -> float:
        return max((self.relative or 0.0) * abs(reference), self.absolute or 0.0)

    def describe(self, reference: float) -> str:
        if self.relative is not None and (self.relative * abs(reference)) >= (self.absolute or 0):
            return f"{self.relative * 100:g}%"
        return f"{self.absolute or 0.0:.4f}"


def _overlay(base: _M, override: BaseModel) -> _M:
    """`base` with the fields written in `override` replacing its own (shallow: no deep merge)."""
    return type(base).model_validate(
        {**base.model_dump(), **override.model_dump(include=override.model_fields_set)}
    )


class Tolerance(Band):
    """The default band plus per-measure overrides, which inherit the fields they leave out."""

    per_measure: Annotated[dict[MeasureField, Band], OneSpellingEach] = Field(default_factory=dict)

    def for_measure(self, measure: Measure) -> Band:
        band = Band(relative=self.relative, absolute=self.absolute)
        override = self.per_measure.get(measure)
        return band if override is None else _overlay(band, override)


class LatencyTolerance(_Strict):
    """A latency statistic regresses when it rises by more than `relative` AND `floor_ms`.

    Wall-clock time is noisy, so the relative band is wide and the floor ignores jitter on
    sub-millisecond systems.
    """

    relative: float = Field(default=0.5, ge=0)
    floor_ms: float = Field(default=5.0, ge=0)
    stats: list[LatencyStat] = Field(default_factory=lambda: ["p50", "p95"])
    attributes: list[str] = Field(
        default_factory=lambda: ["intent"],
        description="query attributes whose groups are compared besides `all` (default: intent)",
    )

    def compares(self, group: str) -> bool:
        return group == OVERALL or group.split("=", 1)[0] in self.attributes


class Spike(_Strict):
    """semantic_degraded_spike: more than `share` of queries lost more than `drop` of `measure`."""

    measure: MeasureField | None = Field(
        default=None, description="default nDCG@10, else first compared"
    )
    drop: float = Field(default=0.2, gt=0)
    share: float = Field(default=0.25, ge=0, le=1)


class Breakage(_Strict):
    """The breakage guard (core/gate/breakage.py): a query broke when its primary measure fell
    from at least `high` to at most `low`; broken queries net of fixed ones block in number."""

    high: float = Field(default=0.5, gt=0, le=1, description="the baseline value it fell from")
    low: float = Field(default=0.1, ge=0, lt=1, description="the run value it fell to")
    # A single broken query blocks: none of 14 real tweaks and 8 real swaps (techdocs, hotel,
    # nfcorpus) had one that was not a real regression, and 2 let a 20-query suite holding one
    # pass (docs/gate.md, "The breakage guard").
    count: int = Field(default=1, ge=1, description="broken queries (net of fixed) that block")
    share: float = Field(
        default=0.01, ge=0, le=1, description="... or this share of the answered ones, if more"
    )
    blocking: bool = True

    def limit(self, answered: int) -> int:
        """Broken queries (net of fixed ones) that block, `answered` the paired queries at
        `high` or more in the baseline (the ones that can break)."""
        return max(self.count, math.ceil(self.share * answered - EPS))


class UnjudgedSpike(_Strict):
    """unjudged_spike: `measure` (a Judged@k) fell by more than `drop` against the baseline, so
    the run retrieves documents nobody judged; its drops may be missing judgments (they block
    as they would anyway; `blocking` makes the rise itself block). unjudged_run: the run lost
    more than `broken` of the baseline's judged documents in its top k, at a rate no real
    change does (its ids do not match the suite's): it always blocks."""

    measure: MeasureField = Field(default="Judged@10", validate_default=True)
    drop: float = Field(default=0.1, gt=0, le=1)
    blocking: bool = False
    broken: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="share of the baseline's judged documents in the top k the run may lose",
    )


# Every rule kind `rules` and `validation` accept, told apart by their `kind` (core/gate/rules.py).
AnyRule = Annotated[Threshold | QueryShare | LatencyBelow | Integrity, Field(discriminator="kind")]


class Calibration(_Strict):
    """The floor an LLM judge must reach on the human-judged pairs before its labels may be
    used for gating (quadratic weighted kappa; docs/synthetic.md)."""

    min_kappa: float = Field(default=0.4, ge=-1, le=1)


class AnchorBand(_Strict):
    """How far a run may fall below its baseline's anchor (core/gate/lineage.py): `factor`
    times the measure's band, so a chain of small losses blocks before it adds up."""

    factor: float = Field(default=2.0, ge=1)


class Approval(_Strict):
    """A reviewed loosening of the deciding policy against the baselines'
    (core/gate/policy_diff.py): the field as the `policy` check names it, the value it was
    loosened to, and why."""

    field: str = Field(min_length=1, description="e.g. statistics.inconclusive, compare")
    to: Any = Field(description="the loosened value this approval is for")
    reason: str = Field(min_length=1)


class GateRules(_Strict):
    """The rules of one dataset (or dataset pattern)."""

    thresholds: MeasureLimits = Field(default_factory=dict)
    targets: MeasureLimits = Field(default_factory=dict)
    latency_max_ms: dict[LatencyStat, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    tolerance: Tolerance = Field(default_factory=Tolerance)
    latency_tolerance: LatencyTolerance = Field(default_factory=LatencyTolerance)
    compare: Annotated[list[MeasureField], OneSpellingEach] | None = None
    budgets: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: list(BUDGETS),
        min_length=1,
        description="token budgets of the evidence measures a chunking change is judged by",
    )
    spike: Spike = Field(default_factory=Spike)
    breakage: Breakage = Field(default_factory=Breakage)
    statistics: Statistics = Field(default_factory=Statistics)
    unjudged: UnjudgedSpike = Field(default_factory=UnjudgedSpike)
    rules: list[AnyRule] = Field(
        default_factory=list, description="more pass/fail rules of the release, of any kind"
    )
    validation: list[AnyRule] = Field(
        default_factory=list,
        description="the validation report's criteria: they decide that report, not the release",
    )

    def limits(self) -> list[Rule]:
        """The absolute rules of the release: `thresholds`, `targets`, then `rules`."""
        return [
            *(Threshold(measure=m, min=v) for m, v in self.thresholds.items()),
            *(Threshold(measure=m, min=v, blocking=False) for m, v in self.targets.items()),
            *self.rules,
        ]

    calibration: Calibration = Field(default_factory=Calibration)
    anchor: AnchorBand = Field(default_factory=AnchorBand)
    loosened: list[Approval] = Field(
        default_factory=list,
        description="reviewed loosenings of the policy the baselines were recorded under",
    )


DEFAULT_RULES_KEY = "default"


class GatePolicy(_Strict):
    """data/gate.yaml: rules per dataset name or fnmatch pattern, on top of `default`."""

    version: Literal[1] = 1
    worst_queries: int = Field(default=5, ge=0, description="per-query regressions listed per run")
    datasets: dict[str, GateRules] = Field(default_factory=dict)

    def rules_for(self, dataset: str) -> GateRules:
        """`default` overlaid with the entry named `dataset`, else the first matching pattern."""
        default = self.datasets.get(DEFAULT_RULES_KEY, GateRules())
        entries = [(k, v) for k, v in self.datasets.items() if k != DEFAULT_RULES_KEY]
        match = dict(entries).get(dataset)
        if match is None:
            match = next((r for p, r in entries if fnmatch.fnmatchcase(dataset, p)), None)
        return default if match is None else _overlay(default, match)


def load_policy(path: Path) -> GatePolicy:
    """Read and validate the gate policy; InputError names the file, line and field."""
    return load_model(Path(path), GatePolicy)


def policy_or_defaults(path: Path) -> GatePolicy:
    """The policy of `path`, or the defaults of docs/gate.md when nothing is there: the rule
    for the data folder's gate.yaml on every surface. A FIFO or a broken link is something
    there, refused by `load_policy` in one line, not taken for no file."""
    there = path.exists() or path.is_symlink()
    return load_policy(path) if there else GatePolicy()
