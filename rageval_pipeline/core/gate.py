"""Release gate: run summaries, baselines, the gate policy, the verdict and its regression taxonomy.

The Dagster layer reads run summaries from the warehouse and baselines from `data/baselines/`,
calls `judge`, and fails its asset check when the verdict has not passed. Everything here is pure
and deterministic: the same summaries, baselines and policy always give the same verdict.
Semantics are documented in docs/gate.md.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    ValidationError,
    computed_field,
)

from rageval_pipeline.core.aggregate import LATENCY_STATS, LatencyStat
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage import write_text

Category = Literal[
    "diversity_collapse",
    "latency_regression",
    "ranking_shift",
    "recall_drop",
    "semantic_degraded_spike",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
CheckKind = Literal[
    "threshold",  # blocking absolute minimum (maximum for lower-is-better measures)
    "target",  # advisory absolute minimum: reported, never blocking
    "baseline",  # mean measure against the baseline within tolerance
    "spike",  # share of queries whose primary measure dropped sharply against the baseline
    "latency",  # overall latency statistic against latency_max_ms
    "latency_baseline",  # latency statistic of one group against the baseline
    "fingerprint",  # the baseline was recorded for this system configuration
    "missing_baseline",  # no baseline for this run: only absolute limits apply
    "value",  # informational: a measure with nothing to compare against, shown in reports
]
Family = Literal["recall", "ranking", "diversity"]
BASELINE_VERSION = "1"
OVERALL = "all"  # the latency group key covering every query

# A measure's family is decided by its name up to the first non-letter: "nDCG@10" -> "nDCG",
# "P(rel=2)@5" -> "P". Unknown names are still compared (higher is better) but get no category.
_FAMILIES: dict[str, Family] = {
    "R": "recall",
    "Success": "recall",
    "ER": "recall",
    "nDCG": "ranking",
    "RR": "ranking",
    "AP": "ranking",
    "P": "ranking",
    "Rprec": "ranking",
    "Diversity": "diversity",
    "Clustering": "diversity",
}
_LOWER_IS_BETTER = frozenset({"Clustering"})
_FAMILY_CATEGORY: dict[Family, Category] = {
    "recall": "recall_drop",
    "ranking": "ranking_shift",
    "diversity": "diversity_collapse",
}
# Values read back from 6-decimal baselines must not fail a comparison that sits on the boundary.
_EPS = 1e-9


def _base_name(measure: str) -> str:
    match = re.match(r"[A-Za-z]+", measure)
    return match.group(0) if match else measure


def measure_family(measure: str) -> Family | None:
    """The family of a canonical measure name ("R@100" -> "recall"), None when unknown."""
    return _FAMILIES.get(_base_name(measure))


def higher_is_better(measure: str) -> bool:
    """False only for measures where a rise is a regression (Clustering@k)."""
    return _base_name(measure) not in _LOWER_IS_BETTER


def measure_sort_key(measure: str) -> tuple[Any, ...]:
    """Natural order, so that nDCG@10 sorts before nDCG@100."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", measure))


def _check_timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}") from None
    return value


Name = Annotated[str, Field(min_length=1)]
Timestamp = Annotated[str, AfterValidator(_check_timestamp)]


class _Strict(BaseModel):
    """Files people edit: a misspelt key is an error, not a silently ignored setting."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- summaries, baselines


class _SummaryFields(_Strict):
    dataset: Name
    split: Name
    system: Name
    fingerprint: Name = Field(description="stable hash of the system configuration")
    measures: dict[str, FiniteFloat]
    per_query: dict[str, dict[str, FiniteFloat]] = Field(default_factory=dict)
    latency: dict[str, dict[LatencyStat, FiniteFloat]] = Field(
        default_factory=dict, description='group ("all", "intent=factual") -> stat -> ms'
    )
    n_queries: int = Field(ge=0)


class RunSummary(_SummaryFields):
    """What one evaluation of (dataset, split, system) measured."""

    run_id: Name
    created_at: Timestamp


class Baseline(_SummaryFields):
    """A reviewed run summary committed under data/baselines/<dataset>/<system>.json."""

    version: Literal["1"] = BASELINE_VERSION
    recorded_at: Timestamp
    source_run_id: Name
    note: str | None = None


def baseline_from_summary(
    summary: RunSummary, note: str | None = None, *, recorded_at: str | None = None
) -> Baseline:
    """Turn a reviewed run into a baseline.

    `recorded_at` defaults to the run's own timestamp so that recording the same run twice
    writes the same file.
    """
    fields = summary.model_dump(exclude={"run_id", "created_at"})
    return Baseline(
        **fields,
        recorded_at=recorded_at or summary.created_at,
        source_run_id=summary.run_id,
        note=note,
    )


def _round_floats(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) + 0.0  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round_floats(v) for v in value]
    return value


def write_baseline(baseline: Baseline, path: Path) -> None:
    """Write with sorted keys, 2-space indent and 6-decimal floats, so diffs stay small."""
    data = _round_floats(baseline.model_dump(mode="json"))
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _safe_component(root: Path, value: str, field: str) -> str:
    if not value or value in {".", ".."} or "/" in value or "\\" in value:
        raise InputError(root, f"{value!r} cannot be used as a file name", field=field)
    return value


def baseline_path(root: Path, dataset: str, system: str) -> Path:
    """Where the baseline of (dataset, system) lives: root/<dataset>/<system>.json."""
    root = Path(root)
    dataset = _safe_component(root, dataset, "dataset")
    return root / dataset / f"{_safe_component(root, system, 'system')}.json"


_M = TypeVar("_M", bound=BaseModel)


def _field_path(loc: tuple[Any, ...]) -> str | None:
    return ".".join(str(part) for part in loc) or None


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest key (or item) of `loc` present in a YAML or JSON document."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == str(part)), None)
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            pair = (node.value[part], node.value[part])
        else:
            pair = None
        if pair is None:
            break
        line = pair[0].start_mark.line + 1
        node = pair[1]
    return line


def _validate(model: type[_M], data: Any, path: Path, text: str) -> _M:
    if data is None:
        raise InputError(path, "file is empty")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        more = exc.error_count() - 1
        problem = error["msg"] + (f" (and {more} more problem(s))" if more else "")
        raise InputError(path, problem, line=_line_of(text, loc), field=_field_path(loc)) from None


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def load_baseline(path: Path) -> Baseline:
    """Read and validate one baseline file; InputError names the file, line and field."""
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    return _validate(Baseline, data, Path(path), text)


def load_baselines(root: Path) -> dict[tuple[str, str], Baseline]:
    """Every baseline under root, keyed by (dataset, system); a missing root means none."""
    root = Path(root)
    out: dict[tuple[str, str], Baseline] = {}
    for path in sorted(root.glob("*/*.json")):
        baseline = load_baseline(path)
        if baseline_path(root, baseline.dataset, baseline.system) != path:
            raise InputError(
                path,
                f"holds the baseline of {baseline.dataset}/{baseline.system}, which belongs in "
                f"{baseline_path(root, baseline.dataset, baseline.system)}",
                field="dataset" if path.parent.name != baseline.dataset else "system",
            )
        out[(baseline.dataset, baseline.system)] = baseline
    return out


# ---------------------------------------------------------------------------------------- policy


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

    per_measure: dict[str, Band] = Field(default_factory=dict)

    def for_measure(self, measure: str) -> Band:
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
        description="query attributes whose groups are compared besides `all` (seed 004: intent)",
    )

    def compares(self, group: str) -> bool:
        return group == OVERALL or group.split("=", 1)[0] in self.attributes


class Spike(_Strict):
    """semantic_degraded_spike: more than `share` of queries lost more than `drop` of `measure`."""

    measure: str | None = Field(default=None, description="default nDCG@10, else first compared")
    drop: float = Field(default=0.2, gt=0)
    share: float = Field(default=0.25, ge=0, le=1)


class GateRules(_Strict):
    """The rules of one dataset (or dataset pattern)."""

    thresholds: dict[str, FiniteFloat] = Field(default_factory=dict)
    targets: dict[str, FiniteFloat] = Field(default_factory=dict)
    latency_max_ms: dict[LatencyStat, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    tolerance: Tolerance = Field(default_factory=Tolerance)
    latency_tolerance: LatencyTolerance = Field(default_factory=LatencyTolerance)
    compare: list[str] | None = None
    spike: Spike = Field(default_factory=Spike)


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
    text = _read(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise InputError(path, f"invalid YAML: {problem}", line=line) from None
    return _validate(GatePolicy, data, Path(path), text)


# --------------------------------------------------------------------------------------- verdict


class Check(BaseModel):
    """One comparison of one run; `category` is set on failures that match a taxonomy label."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    split: str
    system: str
    kind: CheckKind
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

    @property
    def failures(self) -> list[Check]:
        """Failing blocking checks: the reasons the gate is closed."""
        return [c for c in self.checks if c.blocking and not c.passed]

    @property
    def warnings(self) -> list[Check]:
        """Failing non-blocking checks: missed targets, missing baselines, informational deltas."""
        return [c for c in self.checks if not c.blocking and not c.passed]

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
        return sorted({c.category for c in self.failures if c.category is not None})

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        runs = self.runs
        if not runs:
            return "FAIL: no runs were judged"
        failures = self.failures
        if failures:
            failing_runs = {(c.dataset, c.split, c.system) for c in failures}
            labels = ", ".join(self.categories) or "no regression category"
            return (
                f"FAIL: {len(failures)} blocking failure(s) in {len(failing_runs)} of "
                f"{len(runs)} run(s): {labels}"
            )
        warnings = len(self.warnings)
        return f"PASS: {len(runs)} run(s), {len(self.checks)} checks, {warnings} warning(s)"


# --------------------------------------------------------------------------------------- judging


def _deltas(value: float, reference: float) -> tuple[float, float | None]:
    delta = value - reference
    return delta, (delta / reference if reference else None)


def _delta_text(delta: float, relative: float | None, unit: str = "") -> str:
    digits = ".1f" if unit else ".4f"
    text = f"delta {delta:+{digits}}{unit}"
    return text + (f", {relative:+.1%}" if relative is not None else "")


def _category(measure: str) -> Category | None:
    family = measure_family(measure)
    return _FAMILY_CATEGORY[family] if family else None


@dataclass(frozen=True)
class _Run:
    summary: RunSummary
    rules: GateRules

    @property
    def label(self) -> str:
        return f"{self.summary.dataset}/{self.summary.system}"

    def check(self, **fields: Any) -> Check:
        s = self.summary
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
        delta, relative = _deltas(value, reference)
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


def _absolute_check(run: _Run, measure: str, limit: float, kind: CheckKind) -> Check:
    blocking = kind == "threshold"
    value = run.summary.measures.get(measure)
    if value is None:
        return run.check(
            kind=kind,
            measure=measure,
            reference=limit,
            passed=False,
            blocking=blocking,
            message=f"{run.label} {measure} was not computed by this run but the policy has a "
            f"{kind} for it",
        )
    higher = higher_is_better(measure)
    passed = value >= limit if higher else value <= limit
    relation = (">=" if passed else "<") if higher else ("<=" if passed else ">")
    check = run.compared(
        kind=kind,
        measure=measure,
        value=value,
        reference=limit,
        passed=passed,
        blocking=blocking,
        # A missed advisory target is not a regression: it carries no taxonomy label.
        category=_category(measure) if blocking else None,
        message=f"{run.label} {measure} = {value:.4f} {relation} {kind} {limit:.4f}",
    )
    if blocking or passed:
        return check
    return check.model_copy(update={"message": check.message + " (advisory)"})


def _baseline_check(run: _Run, measure: str, baseline: Baseline, blocking: bool) -> Check:
    value = run.summary.measures.get(measure)
    reference = baseline.measures.get(measure)
    if value is None or reference is None:
        # A measure the run lacks can hide a regression; one the baseline lacks cannot.
        missing_in_run = value is None
        return run.check(
            kind="baseline",
            measure=measure,
            value=value,
            reference=reference,
            passed=False,
            blocking=blocking and missing_in_run,
            message=f"{run.label} {measure} is compared with the baseline but was not computed "
            "by this run"
            if missing_in_run
            else f"{run.label} {measure} is not in the baseline; update the baseline to compare it",
        )
    band = run.rules.tolerance.for_measure(measure)
    higher = higher_is_better(measure)
    worsening = reference - value if higher else value - reference
    passed = worsening <= band.allowed(reference) + _EPS
    relation = "within" if passed else ("<" if higher else ">")
    bound = f"baseline {reference:.4f} {'-' if higher else '+'} {band.describe(reference)}"
    return run.compared(
        kind="baseline",
        measure=measure,
        value=value,
        reference=reference,
        passed=passed,
        blocking=blocking,
        category=_category(measure),
        message=f"{run.label} {measure} = {value:.4f} {relation} {bound}",
    )


def _compared_measures(run: _Run, baseline: Baseline) -> list[str]:
    if run.rules.compare is not None:
        return list(run.rules.compare)
    return sorted(set(run.summary.measures) & set(baseline.measures), key=measure_sort_key)


def _primary_measure(run: _Run, compared: list[str]) -> str | None:
    if run.rules.spike.measure:
        return run.rules.spike.measure
    if "nDCG@10" in compared:
        return "nDCG@10"
    return compared[0] if compared else None


def _per_query_pairs(run: _Run, baseline: Baseline, measure: str) -> list[tuple[str, float, float]]:
    """(query_id, baseline value, run value) for queries measured in both, by query id."""
    ours = run.summary.per_query
    return [
        (qid, values[measure], ours[qid][measure])
        for qid, values in sorted(baseline.per_query.items())
        if measure in values and measure in ours.get(qid, {})
    ]


def _worsening(measure: str, reference: float, value: float) -> float:
    return reference - value if higher_is_better(measure) else value - reference


def _spike_check(run: _Run, baseline: Baseline, measure: str, blocking: bool) -> Check:
    spike = run.rules.spike
    pairs = _per_query_pairs(run, baseline, measure)
    if not pairs:
        return run.check(
            kind="spike",
            measure=measure,
            passed=True,
            blocking=False,
            message=f"{run.label} {measure}: no per-query values in both the run and the "
            "baseline, so the spike check was skipped",
        )
    dropped = sum(_worsening(measure, ref, val) > spike.drop + _EPS for _, ref, val in pairs)
    share = dropped / len(pairs)
    passed = share <= spike.share + _EPS
    relation = "<=" if passed else ">"
    delta, relative = _deltas(share, spike.share)
    return run.check(
        kind="spike",
        measure=measure,
        value=share,
        reference=spike.share,
        delta=delta,
        relative_delta=relative,
        passed=passed,
        blocking=blocking,
        category=None if passed else "semantic_degraded_spike",
        message=f"{run.label} {measure} worsened by more than {spike.drop:g} on {dropped} of "
        f"{len(pairs)} queries ({share:.1%} {relation} {spike.share:.1%} allowed)",
    )


def _worst_queries(
    run: _Run, baseline: Baseline, measure: str, limit: int
) -> list[QueryRegression]:
    worse = [
        (_worsening(measure, ref, val), qid, ref, val)
        for qid, ref, val in _per_query_pairs(run, baseline, measure)
        if _worsening(measure, ref, val) > _EPS
    ]
    worse.sort(key=lambda item: (-item[0], item[1]))
    s = run.summary
    return [
        QueryRegression(
            dataset=s.dataset,
            split=s.split,
            system=s.system,
            query_id=qid,
            measure=measure,
            baseline=ref,
            value=val,
            delta=val - ref,
        )
        for _, qid, ref, val in worse[:limit]
    ]


def _groups(groups: Iterable[str]) -> list[str]:
    """Latency groups with the overall group first, the rest sorted."""
    return sorted(groups, key=lambda g: (g != OVERALL, g))


def _latency_max_checks(run: _Run) -> list[Check]:
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


def _latency_baseline_checks(run: _Run, baseline: Baseline, blocking: bool) -> list[Check]:
    tolerance = run.rules.latency_tolerance
    checks = []
    shared = set(run.summary.latency) & set(baseline.latency)
    for group in _groups(g for g in shared if tolerance.compares(g)):
        ours, theirs = run.summary.latency[group], baseline.latency[group]
        for stat in tolerance.stats:
            if stat not in ours or stat not in theirs:
                continue
            value, reference = ours[stat], theirs[stat]
            passed = not (
                value > reference * (1 + tolerance.relative) + _EPS
                and value - reference > tolerance.floor_ms + _EPS
            )
            bound = (
                f"baseline {reference:.1f} ms + {tolerance.relative * 100:g}% and "
                f"+ {tolerance.floor_ms:g} ms"
            )
            checks.append(
                run.compared(
                    kind="latency_baseline",
                    measure=stat,
                    group=group,
                    value=value,
                    reference=reference,
                    passed=passed,
                    blocking=blocking,
                    category="latency_regression",
                    unit=" ms",
                    message=f"{run.label} latency {stat} [{group}] = {value:.1f} ms "
                    f"{'within' if passed else '>'} {bound}",
                )
            )
    return checks


def _update_hint(summary: RunSummary) -> str:
    return f"rageval baseline update --dataset {summary.dataset} --system {summary.system}"


def _baseline_status(run: _Run, baseline: Baseline | None) -> tuple[Check, Baseline | None, bool]:
    """The fingerprint or missing-baseline check, the baseline to compare with (None when there
    is none for this split) and whether those comparisons may block."""
    s = run.summary
    if baseline is None or baseline.split != s.split:
        where = "" if baseline is None else f" (the baseline is for split {baseline.split})"
        check = run.check(
            kind="missing_baseline",
            passed=False,
            blocking=False,
            message=f"{run.label} has no baseline for split {s.split}{where}; only absolute "
            f"thresholds apply. Record one after review: {_update_hint(s)}",
        )
        return check, None, False
    if baseline.fingerprint != s.fingerprint:
        check = run.check(
            kind="fingerprint",
            passed=False,
            blocking=True,
            message=f"{run.label} baseline was recorded for another configuration (fingerprint "
            f"{baseline.fingerprint} != {s.fingerprint}); the deltas below are information "
            f"only. Review the run and update the baseline: {_update_hint(s)}",
        )
        return check, baseline, False
    check = run.check(
        kind="fingerprint",
        passed=True,
        blocking=True,
        message=f"{run.label} baseline fingerprint matches ({s.fingerprint})",
    )
    return check, baseline, True


def _judge_run(
    run: _Run, baseline: Baseline | None, worst_limit: int
) -> tuple[list[Check], list[QueryRegression]]:
    status, baseline, blocking = _baseline_status(run, baseline)
    checks = [status]
    checks += [_absolute_check(run, m, v, "threshold") for m, v in run.rules.thresholds.items()]
    checks += [_absolute_check(run, m, v, "target") for m, v in run.rules.targets.items()]
    worst: list[QueryRegression] = []
    if baseline is not None:
        compared = _compared_measures(run, baseline)
        checks += [_baseline_check(run, m, baseline, blocking) for m in compared]
        primary = _primary_measure(run, compared)
        if primary is not None:
            checks.append(_spike_check(run, baseline, primary, blocking))
            worst = _worst_queries(run, baseline, primary, worst_limit)
    checks += _latency_max_checks(run)
    if baseline is not None:
        checks += _latency_baseline_checks(run, baseline, blocking)
    shown = {c.measure for c in checks}
    checks += [_value_check(run, m, v) for m, v in run.summary.measures.items() if m not in shown]
    return checks, worst


def _value_check(run: _Run, measure: str, value: float) -> Check:
    """A measure no rule covers: reported so every report shows the run's full results."""
    return run.check(
        kind="value",
        measure=measure,
        value=value,
        passed=True,
        blocking=False,
        message=f"{run.label} {measure} = {value:.4f}",
    )


def judge(
    summaries: list[RunSummary],
    baselines: dict[tuple[str, str], Baseline],
    policy: GatePolicy,
    *,
    created_at: str | None = None,
) -> Verdict:
    """Judge every run against the policy and its (dataset, system) baseline.

    `created_at` defaults to the newest run's timestamp, so judging the same runs twice gives
    byte-identical reports.
    """
    runs = sorted(summaries, key=lambda s: (s.dataset, s.split, s.system))
    keys = [(s.dataset, s.split, s.system) for s in runs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"more than one summary for (dataset, split, system): {duplicates}")
    checks: list[Check] = []
    worst: list[QueryRegression] = []
    for summary in runs:
        run = _Run(summary, policy.rules_for(summary.dataset))
        run_checks, run_worst = _judge_run(
            run, baselines.get((summary.dataset, summary.system)), policy.worst_queries
        )
        checks += run_checks
        worst += run_worst
    # Run stamps are UTC ISO-8601 strings, so string order is time order.
    stamp = created_at or max((s.created_at for s in runs), default="")
    return Verdict(created_at=stamp, checks=checks, worst_queries=worst)
