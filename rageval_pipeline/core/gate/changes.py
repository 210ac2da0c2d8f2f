"""What changed between a run and its baseline: the configuration diff and the suite.

A changed configuration is what the gate exists to check, so it is reported, never refused. Only
a changed suite (other judged queries, judgments or judged targets) makes a baseline's numbers
incomparable: then the run is judged on its absolute thresholds and the baseline must be
re-recorded after review.
"""

from __future__ import annotations

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


def suite_changed(summary: RunSummary, baseline: Baseline) -> bool:
    """Whether the run was measured on another suite than the baseline. A baseline recorded
    before suites were fingerprinted is taken as comparable: nothing says otherwise."""
    return None not in (summary.suite, baseline.suite) and summary.suite != baseline.suite


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
        compared_with=("rerun" if summary.baseline_rerun else "thresholds")
        if changed
        else "baseline",
    )


def rerun_baseline(summary: RunSummary, baseline: Baseline) -> Baseline:
    """`baseline` with its measures replaced by its configuration's re-run on the run's suite."""
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
