"""How the report names a run's state and a check: the headline, the state of each run, a
check's status and label, its value and limit, the measures that moved. The first screen
(`summary`), the tables (`render`) and the reports' index say them alike."""

from __future__ import annotations

import json
from typing import Any

from rageval_pipeline.core.gate import Check, RunChange, Verdict
from rageval_pipeline.core.measures.names import try_parse
from rageval_pipeline.core.report.blocks import Tone
from rageval_pipeline.core.report.explain import CONTEXT_KINDS
from rageval_pipeline.core.report.model import LATENCY_KINDS, iso_date

RunKey = tuple[str, str, str]
LIMIT_KINDS = frozenset({"threshold", "target", "latency"})  # a fixed limit, not a baseline


def compared_with(change: RunChange | None) -> str:
    """What a run was compared with, in the words of the first screen and the terminal: the
    stored baseline (and when it was recorded), the baseline's configuration re-run in this run
    (`gate.changes.rerun_reason`), or thresholds only."""
    if change is None:
        return "–"
    if change.compared_with == "rerun":
        return "baseline configuration re-run in this run"
    if change.compared_with == "thresholds":
        return "thresholds only"
    if change.compared_with == "unchanged":
        return f"{stored_words(change)} on the {change.unchanged} unchanged queries"
    return stored_words(change)


def stored_words(change: RunChange) -> str:
    recorded = iso_date(change.baseline_recorded_at)[:10]
    return f"stored baseline of {recorded}" if recorded else "stored baseline"


def run_checks(verdict: Verdict, key: RunKey) -> list[Check]:
    return [c for c in verdict.checks if (c.dataset, c.split, c.system) == key]


def run_state(checks: list[Check]) -> tuple[str, Tone]:
    """A run's verdict as a reader says it: FAIL (categories), INCONCLUSIVE, PASS, improved."""
    failed = [c for c in checks if c.blocking and not c.passed]
    if failed:
        named = {c.category for c in failed if c.category}
        named |= {"inconclusive" for c in failed if c.inconclusive}
        return "FAIL" + (f" ({', '.join(sorted(named))})" if named else ""), "fail"
    if any(undecided(c) for c in checks):
        return "INCONCLUSIVE", "warn"
    warned = [c for c in checks if not c.passed and c.kind not in CONTEXT_KINDS]
    if warned:
        categories = sorted({c.category for c in warned if c.category})
        return "PASS with warnings" + (f" ({', '.join(categories)})" if categories else ""), "warn"
    if any(c.improved for c in checks):
        return "PASS, improved", "better"
    return "PASS", "pass"


def undecided(check: Check) -> bool:
    """A measure the suite cannot tell from a drop of the band. A latency rise that the
    interleaved pairs do not establish is machine noise, not a question for the suite."""
    return check.inconclusive and check.kind not in LATENCY_KINDS


def headline(verdict: Verdict) -> tuple[str, Tone]:
    if not verdict.passed:
        return "Retrieval gate: FAIL", "fail"
    if verdict.improvements and not verdict.warnings:
        return "Retrieval gate: PASS, improved", "better"
    return "Retrieval gate: PASS", "pass"


def shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def number(check: Check, value: float | None) -> str:
    """A check's value or reference as the reports print it (latency in ms)."""
    if value is None:
        return "–"
    if check.kind == "breakage":  # a count of queries
        return f"{value:.0f}"
    return f"{value:.1f} ms" if check.kind in LATENCY_KINDS else f"{value:.4f}"


def limit(check: Check) -> str:
    """How a threshold, target or latency maximum reads: "≥ 0.7000 (target)"."""
    measure = try_parse(check.measure or "")
    at_least = check.kind != "latency" and (measure is None or measure.higher_is_better)
    text = f"{'≥' if at_least else '≤'} {number(check, check.reference)}"
    return text + " (target)" if check.kind == "target" else text


def moved_label(check: Check) -> str:
    """What moved: a measure, a latency statistic [group], or a share of queries / targets."""
    if check.kind == "spike":
        return f"share of queries whose {check.measure} dropped"
    if check.kind == "breakage":
        return f"queries whose {check.measure} broke (net of fixed)"
    if check.kind == "unjudged":
        return "unjudged share of the top 10"
    if check.kind == "anchor":  # (beside the same measure against the baseline)
        return f"{check.measure} against the anchor on unchanged queries"
    if check.measure and check.group:
        return f"{check.measure} [{check.group}]"
    return check.measure or check.kind


def status(check: Check) -> tuple[str, Tone]:
    if check.improved:
        return "IMPROVED", "better"
    if check.inconclusive:
        return "INCONCLUSIVE", "warn"
    tag = f" {check.category}" if check.category else ""
    return ("FAIL" if check.blocking else "WARN") + tag, "fail" if check.blocking else "warn"


def moved(verdict: Verdict) -> list[Check]:
    """Checks of measures that failed, warned, were inconclusive or improved: failures first."""
    out = [
        c for c in verdict.checks if c.kind not in CONTEXT_KINDS and (not c.passed or c.improved)
    ]
    rank = {"fail": 0, "warn": 1, "better": 2}
    return sorted(out, key=lambda c: (rank[status(c)[1]], c.inconclusive))
