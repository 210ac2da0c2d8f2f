"""Baselines on disk: where they live, how they are written and read back."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate.changes import config_changes
from rageval_pipeline.core.gate.decide import decide
from rageval_pipeline.core.gate.evaluation import EPS, Evaluation, worsening
from rageval_pipeline.core.gate.lineage_rule import lineage, primary_loss
from rageval_pipeline.core.gate.models import FROM_FILE, Baseline, RunSummary, Verdict
from rageval_pipeline.core.gate.policy import GatePolicy, GateRules
from rageval_pipeline.core.gate.policy_diff import recorded_policy
from rageval_pipeline.core.gate.quality import compared_measures
from rageval_pipeline.core.io.config import load_model
from rageval_pipeline.core.measures.names import sort_key
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.results.store import METRICS_VERSION
from rageval_pipeline.core.storage.files import write_text


def baseline_from_summary(
    summary: RunSummary,
    note: str | None = None,
    *,
    recorded_at: str | None = None,
    rules: GateRules | None = None,
) -> Baseline:
    """Turn a reviewed run into a baseline, with the deciding policy of `rules` (the policy it
    is recorded under) when given.

    `recorded_at` defaults to the run's own timestamp so that recording the same run twice
    writes the same file.
    """
    fields = summary.model_dump(
        exclude={"run_id", "created_at", "baseline_latency", "baseline_rerun", "latency_pairs"}
    )
    return Baseline(
        **fields,
        recorded_at=recorded_at or summary.created_at,
        source_run_id=summary.run_id,
        note=note,
        package_version=_package_version(),
        code_version=f"{summary.fingerprint}.{METRICS_VERSION}",
        policy=None if rules is None else recorded_policy(summary, rules),
    )


def _package_version() -> str | None:
    try:
        return version("rageval_pipeline")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return None


def describe_changes(old: Baseline | None, new: RunSummary) -> list[str]:
    """The configuration and measure diff of replacing `old` with `new`, one line each:
    `chunking.size: 512 -> 256`, `nDCG@10: 0.3210 -> 0.3350 (+0.0140)`."""
    if old is None:
        return [f"new baseline for {new.dataset}/{new.system}"]
    lines = [f"{k}: {a} -> {b}" for k, (a, b) in config_changes(old.config, new.config).items()]
    if old.fingerprint != new.fingerprint:
        lines.append(f"fingerprint: {old.fingerprint} -> {new.fingerprint}")
    for measure in sorted(set(old.measures) | set(new.measures), key=sort_key):
        a, b = old.measures.get(measure), new.measures.get(measure)
        if a is None or b is None:
            shown = ["–" if v is None else f"{v:.4f}" for v in (a, b)]
            lines.append(f"{measure}: {shown[0]} -> {shown[1]}")
        elif round(a, 6) != round(b, 6):
            lines.append(f"{measure}: {a:.4f} -> {b:.4f} ({b - a:+.4f})")
    return lines


def replacement_verdict(new: RunSummary, old: Baseline, policy: GatePolicy) -> Verdict:
    """Would the gate pass `new` against `old`? Judged by the gate's own rule: the measures
    (and latency) decide whether the new baseline is worse. A new configuration is the point
    of an update and never a reason on its own."""
    return decide([new], {(old.dataset, old.system): old}, policy)


def _round_floats(value: Any) -> Any:
    if isinstance(value, float):
        return round_metric(value)
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round_floats(v) for v in value]
    return value


# Fields written only when set, so baselines recorded before them keep their bytes.
_UNSET_OMITTED = ("policy", "accepted_worse", "replaced", "anchor", "query_digests")


def write_baseline(baseline: Baseline, path: Path) -> None:
    """Write with sorted keys, 2-space indent and 6-decimal floats, so diffs stay small; the
    PPI fields only when set, so baselines without LLM labels keep their bytes."""
    ppi = baseline.human_sample is not None or baseline.llm_per_query
    unused = set() if ppi else {"llm_per_query", "human_sample", "sample_per_query"}
    unused |= {name for name in _UNSET_OMITTED if not getattr(baseline, name)}
    data = _round_floats(baseline.model_dump(mode="json", exclude=unused))
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


def load_baseline(path: Path) -> Baseline:
    """Read and validate one baseline file; InputError names the file, line and field."""
    return load_model(Path(path), Baseline, {FROM_FILE: True})


def load_baselines(root: Path) -> dict[tuple[str, str], Baseline]:
    """Every baseline under root, keyed by (dataset, system); a missing root means none."""
    root = Path(root)
    out: dict[tuple[str, str], Baseline] = {}
    for path in sorted(root.glob("*/*.json")):
        baseline = load_placed(root, path)
        out[(baseline.dataset, baseline.system)] = baseline
    return out


def load_placed(root: Path, path: Path) -> Baseline:
    """The baseline at `path`, refused unless its `dataset` and `system` fields name the file
    it is in (an edit or a copy that did not change them would be compared and rewritten as
    another dataset's)."""
    baseline = load_baseline(path)
    if baseline_path(root, baseline.dataset, baseline.system) != path:
        raise InputError(
            path,
            f"holds the baseline of {baseline.dataset}/{baseline.system}, which belongs in "
            f"{baseline_path(root, baseline.dataset, baseline.system)}",
            field="dataset" if path.parent.name != baseline.dataset else "system",
        )
    return baseline


class Refused(InputError):
    """A baseline update that would replace a baseline with a worse one."""


class Promotion(NamedTuple):
    path: Path  # the baseline file written
    lines: list[str]  # what changed (`describe_changes`)
    worse: list[str]  # compared measures the new baseline is worse on: "nDCG@10: 0.8 -> 0.79"
    refused: str = ""  # why it would have been refused, when --accept-worse accepted it
    baseline: Baseline | None = None  # what was written, lineage and anchor included


def worse_measures(new: RunSummary, old: Baseline, policy: GatePolicy) -> list[str]:
    """`measure: old -> new` for each measure the gate compares (`compared_measures`) on which
    `new` is worse than `old`, however little: within tolerance the update is accepted, but
    every later run is then judged against the lower value. Compared as the file stores it."""
    lines = []
    for measure in compared_measures(Evaluation(new, policy.rules_for(new.dataset)), old):
        before, after = old.measures.get(str(measure)), new.measures.get(str(measure))
        if before is None or after is None:
            continue
        before, after = round_metric(before), round_metric(after)
        if worsening(measure, before, after) > EPS:
            lines.append(f"{measure}: {before} -> {after}")
    return lines


def refusal(new: RunSummary, old: Baseline, policy: GatePolicy) -> str:
    """Why replacing `old` with `new` would store a worse baseline ("" when it would not): the
    gate's own verdict on `new` against `old` (its anchor included), and the primary measure's
    paired loss on the queries both measured beyond the band, which holds even where the
    verdict could only apply thresholds (a changed suite)."""
    # A changed suite's refusal to compare is what the update resolves; the loss on the
    # queries both measured is judged below.
    failures = [c for c in replacement_verdict(new, old, policy).failures if c.kind != "suite"]
    reasons = [c.message for c in failures[:3]]
    if len(failures) > 3:
        reasons.append(f"and {len(failures) - 3} more")
    loss = primary_loss(Evaluation(new, policy.rules_for(new.dataset)), old)
    if loss and not failures:
        reasons.append(loss)
    return "; ".join(reasons)


def promote(
    summaries: list[RunSummary],
    root: Path,
    policy: GatePolicy,
    *,
    accept_worse: str | None = None,
    pin_anchor: bool = False,
    force: bool = False,
    note: str | None = None,
) -> list[Promotion]:
    """Write each summary as its (dataset, system) baseline, with its lineage and anchor
    (`core/gate/lineage.py`); return what each one changed.

    Nothing is written when any of them is worse than the baseline it would replace
    (`refusal`), unless `accept_worse` says why; that reason is stored in the baseline and the
    anchor stays where it was. `force` with `note` is the older spelling of `accept_worse`.
    A new baseline worse on a compared measure but within tolerance is written, and the
    measure is listed in `Promotion.worse` for the caller to warn about."""
    if force and not note:
        raise InputError(None, "--force needs --note saying why the worse baseline is accepted")
    if accept_worse is not None and not accept_worse.strip():
        raise InputError(None, "--accept-worse needs a reason saying why the worse baseline is")
    accept_worse = accept_worse or (note if force else None)
    plans = []
    for summary in summaries:
        path = baseline_path(root, summary.dataset, summary.system)
        old = load_placed(Path(root), path) if path.is_file() else None
        if old is not None and old.split != summary.split:
            old = None  # another split's baseline is not comparable; it is replaced
        lines = describe_changes(old, summary)
        why = "" if old is None else refusal(summary, old, policy)
        if why and accept_worse is None:
            raise Refused(
                path,
                f"refusing a worse baseline ({why}); use --accept-worse '<why>' to accept it",
            )
        worse = [] if old is None else worse_measures(summary, old, policy)
        rules = policy.rules_for(summary.dataset)
        baseline = baseline_from_summary(summary, note=note, rules=rules)
        held = lineage(baseline, old, rules, accepted=accept_worse if why else None, pin=pin_anchor)
        baseline = baseline.model_copy(update=held)
        plans.append(Promotion(path, lines, worse, why, baseline))
    for promotion in plans:
        write_baseline(promotion.baseline, promotion.path)
    return plans
