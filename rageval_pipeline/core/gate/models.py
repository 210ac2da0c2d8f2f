"""The gate's vocabulary: run summaries, baselines, checks and the verdict (labels: `taxonomy`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    ValidationInfo,
    computed_field,
    model_validator,
)

from rageval_pipeline.core.gate.deciding import DecidingPolicy
from rageval_pipeline.core.gate.decision import Resolution
from rageval_pipeline.core.gate.lineage import Anchor, Lineage
from rageval_pipeline.core.gate.taxonomy import Category
from rageval_pipeline.core.io.config import rule
from rageval_pipeline.core.measures.aggregate import LATENCY_STATS, LatencyStat  # noqa: F401 - re-exported
from rageval_pipeline.core.measures.names import MeasureName, OneSpellingEach, parse_measure
from rageval_pipeline.core.statistics.paired import PairedTest
from rageval_pipeline.core.statistics.sampling import HumanSample

CheckKind = Literal[
    "threshold",  # blocking absolute minimum (maximum for lower-is-better measures)
    "target",  # advisory absolute minimum: reported, never blocking
    "baseline",  # mean measure against the baseline within tolerance
    "spike",  # share of queries whose primary measure dropped sharply against the baseline
    "breakage",  # queries whose primary measure fell from high to near zero (answer lost)
    "unjudged",  # share of unjudged documents in the top k, against the baseline
    "latency",  # overall latency statistic against latency_max_ms
    "latency_baseline",  # latency statistic of one group against the baseline
    "configuration",  # informational: the run's configuration differs from the baseline's
    "suite",  # the suite (queries, judgments, judged ids) changed: baseline not comparable
    "level",  # run and baseline scored at different levels (document vs chunk): refused
    "policy",  # the deciding policy is looser than the one the baseline was recorded under
    "anchor",  # the primary measure against the anchor baseline, with the cumulative band
    "missing_baseline",  # no baseline for this run: only absolute limits apply
    "watched",  # a measure outside `compare` against the baseline: a warning when it moved
    "value",  # informational: a measure with nothing to compare against, shown in reports
]
# Kinds whose `measure` is a measure compared with a limit or a baseline (not a statistic).
MEASURE_KINDS = frozenset({"threshold", "target", "baseline", "watched"})
# The check kinds of the policy's rule kinds beyond those above: `core/gate/rules.py` adds each
# as it defines the rule, so a new rule kind needs no edit here.
RULE_CHECK_KINDS: set[str] = set()
BASELINE_VERSION = "1"
OVERALL = "all"  # the latency group key covering every query


def _known_kind(kind: str) -> str:
    if kind not in get_args(CheckKind) and kind not in RULE_CHECK_KINDS:
        raise ValueError(f"unknown check kind {kind!r}")
    return kind


def _check_timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}") from None
    return value


Name = Annotated[str, Field(min_length=1)]
MeasureValues = Annotated[dict[MeasureName, FiniteFloat], OneSpellingEach]
Timestamp = Annotated[str, AfterValidator(_check_timestamp)]


class _Strict(BaseModel):
    """Files people edit: a misspelt key is an error, not a silently ignored setting."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- summaries, baselines


class Listed(_Strict):
    """One retrieved id of a query's list, with its grade (None: unjudged)."""

    id: str
    grade: int | None = None


class _SummaryFields(_Strict):
    dataset: Name
    split: Name
    system: Name
    fingerprint: Name = Field(description="stable hash of the system configuration")
    measures: MeasureValues
    per_query: dict[str, MeasureValues] = Field(default_factory=dict)
    latency: dict[str, dict[LatencyStat, FiniteFloat]] = Field(
        default_factory=dict, description='group ("all", "intent=factual") -> stat -> ms'
    )
    latency_queries: dict[str, int] = Field(
        default_factory=dict, description="group -> how many queries were timed in it"
    )
    n_queries: int = Field(ge=0)
    intervals: Annotated[dict[MeasureName, tuple[FiniteFloat, FiniteFloat]], OneSpellingEach] = (
        Field(default_factory=dict, description="95% bootstrap interval of each mean")
    )
    suite: str | None = Field(
        None, description="digest of the judged queries, judgments and target ids measured on"
    )
    machine: str | None = Field(None, description="digest of the hardware latency was timed on")
    level: Literal["document", "chunk"] | None = Field(
        None, description="what the judgments ranked: documents or chunks (None: not recorded)"
    )
    # What a person reads (absent from summaries and baselines stored before them):
    k: int | None = Field(None, ge=1, description="the depth each query was retrieved to")
    config: dict | None = Field(None, description="the system's configuration as run")
    top: dict[str, list[Listed]] = Field(
        default_factory=dict, description="query -> its first 10 ids with their grades"
    )
    # Prediction-powered inference (statistics.rule `ppi`, docs/statistics.md) over a population
    # of queries (a suite's companion set, or the suite itself): values with human qrels on its
    # recorded random sample, and with LLM qrels on every query of it.
    sample_per_query: dict[str, MeasureValues] = Field(
        default_factory=dict, description="query -> values with human qrels, drawn queries"
    )
    llm_per_query: dict[str, MeasureValues] = Field(
        default_factory=dict, description="query -> values with LLM qrels, every query"
    )
    human_sample: HumanSample | None = Field(
        None, description="the recorded random draw of the human-judged queries"
    )
    query_digests: dict[str, str] = Field(
        default_factory=dict,
        description="query -> digest of its text, judgments and spans (results.store)",
    )


class Rerun(_Strict):
    """The baseline's configuration re-run and measured on the run's queries in the same run:
    what a built-in system is judged against, query by query, when the stored baseline's numbers
    do not serve (`changes.rerun_reason`: the suite or the chunking changed, or it lacks a
    measure the run has)."""

    reason: str | None = None  # why, in words ("the chunking changed"); None: the suite did
    measures: MeasureValues
    per_query: dict[str, MeasureValues] = Field(default_factory=dict)
    intervals: Annotated[dict[MeasureName, tuple[FiniteFloat, FiniteFloat]], OneSpellingEach] = (
        Field(default_factory=dict)
    )


class RunSummary(_SummaryFields):
    """What one evaluation of (dataset, split, system) measured."""

    run_id: Name
    created_at: Timestamp
    baseline_latency: dict[str, dict[LatencyStat, FiniteFloat]] = Field(
        default_factory=dict,
        description="the baseline's configuration timed beside this run: latency on one machine",
    )
    baseline_rerun: Rerun | None = None
    latency_pairs: dict[str, dict[str, FiniteFloat]] = Field(
        default_factory=dict,
        description="group -> the per-query ratio to the baseline configuration timed beside: "
        "pairs, ratio_p50, ratio_low (its 95% lower bound)",
    )


class Baseline(_SummaryFields):
    """A reviewed run summary committed under data/baselines/<dataset>/<system>.json."""

    version: Literal["1"] = BASELINE_VERSION
    recorded_at: Timestamp
    source_run_id: Name
    note: str | None = None
    package_version: str | None = None  # rageval_pipeline's version that measured it
    code_version: str | None = None  # the metrics asset's code version (fingerprint.measures)
    policy: DecidingPolicy | None = Field(
        None, description="the deciding policy it was recorded under (None: not recorded)"
    )
    accepted_worse: str | None = Field(
        None, description="why it was accepted though worse than the baseline it replaced"
    )
    replaced: Lineage | None = Field(None, description="the baseline this one replaced")
    anchor: Anchor | None = Field(
        None, description="the baseline it is held to with a cumulative band (None: itself)"
    )

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Baseline:
        """Read from a file (`load_baseline` says so in the context), which a person may have
        edited: every value within its measure's range, and each mean the mean of its
        `per_query` (to the 6 decimals files store), unless the mean is a PPI estimate over
        LLM-judged queries (`human_sample`)."""
        if not (info.context or {}).get(FROM_FILE):
            return self
        for measure, value in self.measures.items():
            _in_range(("measures", measure), measure, value)
        for query, values in self.per_query.items():
            for measure, value in values.items():
                _in_range(("per_query", query, measure), measure, value)
        if self.human_sample is not None or not self.per_query:
            return self
        for measure, mean in self.measures.items():
            values = [q[measure] for q in self.per_query.values() if measure in q]
            mean_of_queries = sum(values) / len(values) if values else mean
            if abs(mean_of_queries - mean) > MEAN_TOLERANCE:
                problem = (
                    f"{mean} is not the mean of its per_query values ({mean_of_queries:.6f} "
                    f"over {len(values)} queries): re-record the baseline (`rageval baseline "
                    "update`) rather than editing it"
                )
                raise rule(("measures", measure), problem)
        return self


FROM_FILE = "from_file"  # validation context: the baseline was read from a file
# Means and per-query values are stored to 6 decimals: the mean of rounded values is within
# 5e-7 of the rounded mean; anything beyond 1e-5 was edited.
MEAN_TOLERANCE = 1e-5


def _in_range(loc: tuple[str, ...], measure: str, value: float) -> None:
    top = parse_measure(measure).MAX_VALUE
    if not 0 <= value <= top:
        raise rule(loc, f"{value} is outside the range of {measure} (0 to {top:g})")


# --------------------------------------------------------------------------------------- verdict


class Check(BaseModel):
    """One comparison of one run; `category` is set on failures that match a taxonomy label."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    split: str
    system: str
    kind: Annotated[str, AfterValidator(_known_kind)]  # a CheckKind or a rule's (RULE_CHECK_KINDS)
    measure: str | None = None  # a measure name, or a latency statistic for latency kinds
    group: str | None = None  # latency group ("all", "intent=factual") for latency kinds
    value: float | None = None
    reference: float | None = None  # the threshold, target, limit or baseline value
    delta: float | None = None  # value - reference
    relative_delta: float | None = None  # delta / reference
    passed: bool
    blocking: bool
    category: Category | None = None
    message: str
    ci_low: float | None = None  # interval of `value` (a mean over queries)
    ci_high: float | None = None
    paired: PairedTest | None = None  # per-query comparison with the baseline
    inconclusive: bool = False  # the statistics cannot tell a drop of the band from none
    improved: bool = False  # better beyond tolerance, and the statistics establish it
    resolution: Resolution | None = None  # what the suite can tell on this measure


class ConfigChange(BaseModel):
    """One configuration value that differs from the baseline's, as a dotted key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    before: Any = None
    after: Any = None


class RunChange(BaseModel):
    """What changed between a run and its baseline, and what the run was compared with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    split: str
    system: str
    fingerprint: str
    baseline_fingerprint: str | None = None
    config: list[ConfigChange] = Field(default_factory=list)
    suite_changed: bool = False
    # baseline: measures judged against the stored baseline with paired statistics; rerun:
    # against the baseline's configuration re-run in this run (`changes.rerun_reason`);
    # thresholds: no comparable baseline, so only absolute thresholds decide.
    # unchanged: against the stored baseline of another suite version, on the queries whose
    # digests are unchanged (`unchanged` of them; core/gate/unchanged.py).
    compared_with: Literal["baseline", "rerun", "thresholds", "unchanged"] = "baseline"
    unchanged: int | None = None
    baseline_recorded_at: str | None = None  # when the stored baseline was recorded
    rerun_reason: str | None = None  # why the baseline's configuration was re-run
    level: Literal["document", "chunk"] | None = None  # what the run was scored on
    # When the chunking or scoring level changed: what the verdict was decided on, in words
    # (`core.gate.comparable`); None when every measure was comparable.
    note: str | None = None
    policy: DecidingPolicy | None = None  # the policy that decided the run
    baseline_policy: DecidingPolicy | None = None  # the one its baseline was recorded under


class QueryRegression(BaseModel):
    """One query whose primary measure got worse than in the baseline."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    split: str
    system: str
    query_id: str
    measure: str
    baseline: float
    value: float
    delta: float


class Verdict(BaseModel):
    """The gate's answer. It fails closed: no runs judged means not passed."""

    created_at: str
    checks: list[Check]
    worst_queries: list[QueryRegression] = Field(default_factory=list)
    changes: list[RunChange] = Field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        """Failing blocking checks: the reasons the gate is closed."""
        return [c for c in self.checks if c.blocking and not c.passed]

    @property
    def warnings(self) -> list[Check]:
        """Failing non-blocking checks: missed targets, missing baselines, informational deltas,
        inconclusive drops."""
        return [c for c in self.checks if not c.blocking and not c.passed]

    @property
    def inconclusive(self) -> list[Check]:
        """Measures whose statistics cannot tell a drop of the band from none (they block,
        under `statistics.inconclusive: block_likely` only when the drop is likely)."""
        return [c for c in self.checks if c.inconclusive]

    @property
    def improvements(self) -> list[Check]:
        """Measures that got better beyond tolerance, established by the statistics."""
        return [c for c in self.checks if c.improved]

    def judged_by(self, key: tuple[str, str, str]) -> str | None:
        """The primary measure the run `key` (dataset, split, system) was judged by: its spike
        check's; None when the gate compared no measure of it with a baseline."""
        return next(
            (
                c.measure
                for c in self.checks
                if c.kind == "spike" and (c.dataset, c.split, c.system) == key
            ),
            None,
        )

    @property
    def runs(self) -> list[tuple[str, str, str]]:
        """(dataset, split, system) of every judged run, in check order."""
        return list(dict.fromkeys((c.dataset, c.split, c.system) for c in self.checks))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return bool(self.checks) and not self.failures

    @computed_field  # type: ignore[prop-decorator]
    @property
    def categories(self) -> list[Category]:
        """The taxonomy of what regressed: blocking failures and warnings alike, so a watched
        measure's drop (R@100 -> recall_drop) is named even when only `compare` blocks."""
        failed = (c for c in self.checks if not c.passed and not c.inconclusive)
        return sorted({c.category for c in failed if c.category is not None})

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        runs = self.runs
        if not runs:
            return "FAIL: no runs were judged"
        failures = self.failures
        if failures:
            # Only what blocks is counted and named: a warning's label is not a reason.
            failing_runs = {(c.dataset, c.split, c.system) for c in failures}
            named = {c.category for c in failures if c.category is not None}
            named |= {"inconclusive" for c in failures if c.inconclusive}
            # A failure outside the taxonomy (a loosened policy, the anchor) by its check's kind.
            named |= {f"{c.kind} check" for c in failures if not (c.category or c.inconclusive)}
            labels = ", ".join(sorted(named))
            systems = ", ".join(sorted({system for _, _, system in failing_runs}))
            return (
                f"FAIL: {len(failures)} blocking failure(s) in {len(failing_runs)} of "
                f"{len(runs)} run(s) ({systems}): {labels}"
            )
        warnings, unsure = len(self.warnings), len(self.inconclusive)
        text = f"PASS: {len(runs)} run(s), {len(self.checks)} checks, {warnings} warning(s)"
        text += f", {unsure} inconclusive" if unsure else ""
        better = sorted({f"{c.system} {c.measure}" for c in self.improvements})
        return text + (f"; improved: {', '.join(better)}" if better else "")
