"""What changed between a run and its baseline: the configuration diff and the suite.

A changed configuration is what the gate exists to check, so it is reported, never refused. Only
a changed suite (other judged queries, judgments or judged targets) makes a baseline's numbers
incomparable: then the run is judged on its absolute thresholds and the baseline must be
re-recorded after review.

For a built-in system the pipeline can do better than stored numbers: it re-runs the baseline's
recorded configuration on the same queries in the same run (`rerun_reason` says when) and the
gate compares query by query against that (`Rerun`). Stored numbers stay the fallback for the
systems it cannot re-run (HTTP, Python entry point, run file, fusion).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rageval_pipeline.core.gate.models import Baseline, ConfigChange, RunChange, RunSummary


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as dotted keys: {"chunking": {"size": 512}} -> chunking.size."""
    if isinstance(config, dict) and config:
        out: dict[str, Any] = {}
        for key in sorted(config):
            out |= flatten(config[key], f"{prefix}{key}.")
        return out
    return {prefix[:-1]: config} if prefix else {}


def config_changes(old: dict | None, new: dict | None) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (before, after) for every configuration value that differs."""
    before, after = flatten(old or {}), flatten(new or {})
    keys = sorted(set(before) | set(after))
    return {k: (before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)}


def chunking_changes(old: dict | None, new: dict | None) -> list[str]:
    """`chunking.size: 256 -> 512` for every chunking key that differs (a member's or a
    reranker's candidates' too)."""
    return [
        f"{key}: {before} -> {after}"
        for key, (before, after) in config_changes(old, new).items()
        if "chunking" in key.split(".")
    ]


def rerun_reason(
    config: dict, suite: str | None, measured: Iterable[str], baseline: Baseline
) -> str | None:
    """Why the baseline's configuration is re-run beside a run of `config` on `suite` measuring
    `measured` (None: the stored numbers serve). The suite changed: the stored numbers were
    measured on another one. The chunking changed: the run is judged on the evidence measures
    at token budgets, paired query by query with the baseline configuration's on the same
    chunked corpus and spans. The stored baseline lacks a measure the run has (one added since,
    such as the budget measures): the re-run measures it. An unchanged configuration is not
    re-run for a missing measure: its re-run would be the run itself."""
    if _other_suite(suite, baseline):
        return "the suite changed"
    if chunking_changes(baseline.config, config):
        return "the chunking changed"
    missing = [m for m in measured if m not in baseline.measures]
    if missing and config != baseline.config:
        more = f" and {len(missing) - 2} more" if len(missing) > 2 else ""
        return f"the stored baseline lacks {', '.join(missing[:2])}{more}"
    return None


def suite_changed(summary: RunSummary, baseline: Baseline) -> bool:
    """Whether the run was measured on another suite than the baseline."""
    return _other_suite(summary.suite, baseline)


def _other_suite(suite: str | None, baseline: Baseline) -> bool:
    """Whether `suite` (a suite's fingerprint) is another than the baseline's. A baseline
    recorded before suites were fingerprinted is taken as comparable: nothing says otherwise."""
    return None not in (suite, baseline.suite) and suite != baseline.suite


def level_changed(summary: RunSummary, baseline: Baseline) -> bool:
    """Whether run and baseline were scored at different levels (document vs chunk): then no
    measure of one is comparable with the other's. A level not recorded says nothing."""
    return None not in (summary.level, baseline.level) and summary.level != baseline.level


def run_change(
    summary: RunSummary, baseline: Baseline | None, *, across_levels: bool = False
) -> RunChange:
    """The configuration diff and suite status of `summary` against `baseline`; a baseline at
    another scoring level is compared only `across_levels` (on budget measures: `comparable`)."""
    if (
        baseline is None
        or baseline.split != summary.split
        or (level_changed(summary, baseline) and not across_levels)
    ):
        return RunChange(
            dataset=summary.dataset,
            split=summary.split,
            system=summary.system,
            fingerprint=summary.fingerprint,
            level=summary.level,
            compared_with="thresholds",
        )
    changed = suite_changed(summary, baseline)
    rerun = summary.baseline_rerun
    diff = [
        ConfigChange(key=k, before=a, after=b)
        for k, (a, b) in config_changes(baseline.config, summary.config).items()
    ]
    return RunChange(
        dataset=summary.dataset,
        split=summary.split,
        system=summary.system,
        fingerprint=summary.fingerprint,
        baseline_fingerprint=baseline.fingerprint,
        config=diff,
        level=summary.level,
        suite_changed=changed,
        compared_with="rerun" if rerun else "thresholds" if changed else "baseline",
        baseline_recorded_at=baseline.recorded_at,
        rerun_reason=None if rerun is None else rerun.reason or "the suite changed",
    )


def rerun_baseline(summary: RunSummary, baseline: Baseline) -> Baseline:
    """`baseline` with its measures replaced by its configuration's re-run in the run's job."""
    rerun = summary.baseline_rerun
    assert rerun is not None
    return baseline.model_copy(
        update={
            "measures": rerun.measures,
            "per_query": rerun.per_query,
            "intervals": rerun.intervals,
            "suite": summary.suite,
            "top": {},
        }
    )


def describe(change: RunChange) -> str:
    """`k1: 1.5 -> 0.3, b: 0.75 -> 0.2` (or why there is no diff to show)."""
    if change.config:
        return ", ".join(f"{c.key}: {c.before} -> {c.after}" for c in change.config)
    if change.baseline_fingerprint not in (None, change.fingerprint):
        return f"fingerprint {change.baseline_fingerprint} -> {change.fingerprint}"
    return "unchanged"
