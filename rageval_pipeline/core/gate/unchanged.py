"""A baseline of another suite version, compared on the queries whose digests are unchanged.

Every run records per judged query a digest of what decides its value (its text, judgments and
spans: `core.results.store.query_digests`), and so does a baseline recorded from it. When the
suite changed since the baseline and the run carries no re-run of the baseline's configuration
(`changes.rerun_reason`: built-in systems, the stronger comparison), the run and the baseline
are both narrowed to the queries present in both with equal digests, and judged there with the
paired statistics: whatever the system (Python, HTTP, run file, fusion, rerank). Added and
changed queries are scored in the run's own means and listed, not compared. With fewer than
MIN_UNCHANGED such queries, or a baseline that recorded no digests, the gate cannot compare
and blocks (the `suite` check), instead of judging on absolute thresholds alone.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

from rageval_pipeline.core.gate.evaluation import Evaluation
from rageval_pipeline.core.gate.models import Baseline, Check, RunSummary

# Below this many unchanged queries there is nothing a paired comparison could rest on (the
# decision passes nothing on fewer than 20 queries unless no query moved: decision.py).
MIN_UNCHANGED = 10
_S = TypeVar("_S", RunSummary, Baseline)


class SuiteDiff(NamedTuple):
    """The run's queries against the baseline's, by digest."""

    unchanged: list[str]
    added: list[str]
    changed: list[str]
    removed: list[str]

    def describe(self) -> str:
        parts = [f"{len(self.unchanged)} unchanged"]
        for name, ids in (("added", self.added), ("changed", self.changed)):
            if ids:
                shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
                parts.append(f"{len(ids)} {name} ({shown})")
        if self.removed:
            parts.append(f"{len(self.removed)} removed")
        return ", ".join(parts)


def suite_diff(run: RunSummary, baseline: Baseline) -> SuiteDiff:
    ours, theirs = run.query_digests, baseline.query_digests
    return SuiteDiff(
        unchanged=sorted(q for q, d in ours.items() if theirs.get(q) == d),
        added=sorted(q for q in ours if q not in theirs),
        changed=sorted(q for q, d in ours.items() if q in theirs and theirs[q] != d),
        removed=sorted(q for q in theirs if q not in ours),
    )


def narrowed(summary: _S, queries: list[str], suite: str | None) -> _S:
    """`summary` on `queries` alone: per-query values, means and top lists of those queries;
    measures without per-query values are left out (they cannot be narrowed)."""
    keep = set(queries)
    per_query = {q: v for q, v in summary.per_query.items() if q in keep}
    names = sorted({m for values in per_query.values() for m in values})
    measures = {}
    for name in names:
        values = [v[name] for v in per_query.values() if name in v]
        measures[name] = sum(values) / len(values)
    return summary.model_copy(
        update={
            "per_query": per_query,
            "measures": measures,
            "intervals": {},
            "n_queries": len(per_query),
            "top": {q: t for q, t in summary.top.items() if q in keep},
            "query_digests": {q: d for q, d in summary.query_digests.items() if q in keep},
            "suite": suite,
        }
    )


class Narrowed(NamedTuple):
    """What a changed suite leaves to compare: the run and baseline on the unchanged queries
    (None when too few remain), and the `suite` check that says so."""

    run: Evaluation | None
    baseline: Baseline | None
    check: Check
    unchanged: int


def on_unchanged(run: Evaluation, stored: Baseline) -> Narrowed:
    """The run and `stored` narrowed to their unchanged queries, or a blocking refusal."""
    s = run.summary
    hint = run.update_command()
    if not stored.query_digests or not s.query_digests:
        why = (
            "the baseline recorded no per-query digests"
            if s.query_digests
            else ("the run recorded no per-query digests")
        )
        diff = None
    else:
        diff = suite_diff(s, stored)
        why = f"only {len(diff.unchanged)} of its queries are unchanged ({diff.describe()})"
    if diff is None or len(diff.unchanged) < MIN_UNCHANGED:
        check = run.check(
            kind="suite",
            passed=False,
            blocking=True,
            message=f"{run.label} was measured on another suite version than its baseline and "
            f"{why}: fewer than {MIN_UNCHANGED} queries to compare with the paired statistics, "
            "so the gate cannot tell whether it got worse and blocks. Review the run on the new "
            f"suite and re-record the baseline: {hint}",
        )
        return Narrowed(None, None, check, 0 if diff is None else len(diff.unchanged))
    suite = s.suite
    check = run.check(
        kind="suite",
        passed=False,
        blocking=False,
        message=f"{run.label} was measured on another suite version than its baseline "
        f"({diff.describe()}): compared with the baseline on the {len(diff.unchanged)} "
        "unchanged queries with the paired statistics; the added and changed queries are "
        f"scored in this run's values, not compared. Once reviewed: {hint}",
    )
    return Narrowed(
        Evaluation(narrowed(s, diff.unchanged, suite), run.rules, integrity=run.integrity),
        narrowed(stored, diff.unchanged, suite),
        check,
        len(diff.unchanged),
    )
