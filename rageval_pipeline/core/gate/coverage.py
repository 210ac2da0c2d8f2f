"""Judgment coverage: the share of unjudged documents in the top k, unjudged_spike and
unjudged_run.

A system that retrieves documents nobody judged scores them as non-relevant, so its standard
measures drop whether or not its retrieval got worse. When the run's Judged@k fell by more than
the policy's `unjudged.drop` against the baseline, the check fails as `unjudged_spike` (blocking
only when `unjudged.blocking`), and the failing drops of the standard measures are labelled
`unjudged_spike` too, naming the likely cause; they block as they would anyway, since a drop
that may be missing judgments may as well be a real one. Condensed measures (`nDCG(judged)@10`)
rank judged documents only and keep their own label: a drop there is a real one.

A run that lost more than `unjudged.broken` of the baseline's judged documents in its top k
(every id replaced: all of them) is not a changed retriever but a broken run: ids that do not
match the corpus, another corpus, or a new chunking without derived judgments. It is blocked as
`unjudged_run` whatever `unjudged.blocking` says, with the cause and the fix in one line.

The same bound read the other way round: a baseline holding less than `1 - unjudged.broken` of
the run's judged documents in its top k (a baseline run from another corpus: none of its ids
judged) is not a baseline of this suite. Every measure of it is near zero, so any run would
read as "improved"; the run is judged on absolute limits alone and the report says why.
"""

from __future__ import annotations

from rageval_pipeline.core.gate.evaluation import EPS, Evaluation
from rageval_pipeline.core.gate.models import Baseline, Check
from rageval_pipeline.core.measures.names import try_parse

NAMED = 10  # queries named in a message (all are counted)

_HINT = (
    "the drops below may be missing judgments rather than worse retrieval: judge the new "
    "documents (`rageval pool`) or compare the condensed (judged) measures"
)
_CAUSE = (
    "its ids likely do not match the corpus (another corpus, or a new chunking without derived "
    "judgments), or it leaves queries unanswered; map the run's ids to the corpus's, judge the "
    "new documents with `rageval pool`, or answer every query"
)


def unjudged_check(run: Evaluation, baseline: Baseline | None) -> Check | None:
    """The share of unjudged documents in the run's top k, against the baseline's share."""
    spec = run.rules.unjudged
    name = str(spec.measure)
    judged = run.summary.measures.get(name)
    if judged is None:
        return None
    share = 1.0 - judged
    text = f"{run.label} unjudged documents in the top {spec.measure.k}: {share:.1%}"
    reference = None if baseline is None else baseline.measures.get(name)
    if reference is None:
        return run.check(
            kind="unjudged",
            measure=name,
            value=share,
            passed=True,
            blocking=False,
            ci_low=None,
            ci_high=None,
            message=text + " (no baseline value to compare)",
        )
    before = 1.0 - reference
    rise = share - before
    lost = 1.0 - judged / reference if reference > EPS else 0.0
    passed = rise <= spec.drop + EPS
    fields = dict(
        kind="unjudged",
        measure=name,
        value=share,
        reference=before,
        delta=rise,
        relative_delta=rise / before if before else None,
        ci_low=None,
        ci_high=None,
    )
    if lost > spec.broken + EPS:
        message = (
            f"{run.label} retrieves documents the suite never judged: {share:.0%} of its top "
            f"{spec.measure.k} is unjudged against {before:.0%} for the baseline, so it lost "
            f"{lost:.0%} of the judged documents (more than the {spec.broken:.0%} a real change "
            f"loses, unjudged.broken){_emptied(run, baseline, name)}: {_CAUSE}"
        )
        return run.check(
            **fields, passed=False, blocking=True, category="unjudged_run", message=message
        )
    relation = "within" if passed else "beyond"
    message = (
        f"{text}, baseline {before:.1%} ({spec.measure} {reference:.4f} -> {judged:.4f}, "
        f"{relation} the allowed fall of {spec.drop:g})"
    )
    return run.check(
        **fields,
        passed=passed,
        blocking=spec.blocking,
        category=None if passed else "unjudged_spike",
        message=message if passed else f"{message}: {_HINT}",
    )


def foreign_baseline(run: Evaluation, baseline: Baseline | None) -> Check | None:
    """A warning that replaces the comparison when the baseline's top k is mostly unjudged
    against the run's (`unjudged.broken` of the run's judged documents missing from it)."""
    spec = run.rules.unjudged
    name = str(spec.measure)
    judged = run.summary.measures.get(name)
    reference = None if baseline is None else baseline.measures.get(name)
    if judged is None or reference is None or judged <= EPS:
        return None
    missing = 1.0 - reference / judged
    if missing <= spec.broken + EPS:
        return None
    return run.check(
        kind="unjudged",
        measure=name,
        value=1.0 - judged,
        reference=1.0 - reference,
        delta=reference - judged,
        passed=False,
        blocking=False,
        message=f"{run.label}: its baseline retrieves documents the suite never judged: "
        f"{1.0 - reference:.0%} of the baseline's top {spec.measure.k} is unjudged against "
        f"{1.0 - judged:.0%} of this run's (it lacks {missing:.0%} of the judged documents, "
        f"more than the {spec.broken:.0%} a real change loses, unjudged.broken), so it was "
        "likely recorded on another corpus or chunking and is not comparable: this run is "
        "judged on absolute thresholds only; compare it with a baseline of this suite's corpus",
    )


def _emptied(run: Evaluation, baseline: Baseline, name: str) -> str:
    """How many queries have nothing judged in the top k that had some in the baseline."""
    ours = run.summary.per_query
    emptied = [
        q
        for q, values in baseline.per_query.items()
        if values.get(name, 0.0) > EPS and ours.get(q, {}).get(name, 0.0) <= EPS
    ]
    return f"; {len(emptied)} of {len(baseline.per_query)} queries have none" if emptied else ""


def _explained(check: Check) -> bool:
    """A failing drop of a measure that unjudged documents lower: standard qrels measures."""
    if check.passed or check.value is None:
        return False  # a measure the run did not compute is a configuration problem
    measure = try_parse(check.measure or "")
    if check.kind not in {"baseline", "spike", "watched"} or measure is None:
        return False
    return measure.USES_QRELS and measure.family != "coverage" and not measure.judged


def explain_drops(checks: list[Check], coverage: Check | None) -> list[Check]:
    """When `coverage` (the unjudged check) failed, the drops it may explain carry its label;
    each blocks as it did: missing judgments are a cause to look at, not a pass."""
    if coverage is None or coverage.passed:
        return checks
    return [
        c.model_copy(
            update={
                "category": coverage.category,
                "message": f"{c.message} [may be missing judgments: {coverage.category}]",
            }
        )
        if _explained(c)
        else c
        for c in checks
    ]


def dropped_check(run: Evaluation, stored: Baseline | None) -> Check | None:
    """A suite that lost judged queries of the stored baseline blocks: the queries that got
    worse are the easiest to drop, and a changed suite is otherwise judged on limits alone. A
    reviewed baseline update (which refuses a worse run without --force) is the way out."""
    if stored is None or stored.split != run.summary.split or not run.summary.per_query:
        return None
    gone = sorted(set(stored.per_query) - set(run.summary.per_query))
    if not gone:
        return None
    named = ", ".join(gone[:NAMED]) + (
        f" and {len(gone) - NAMED} more" if len(gone) > NAMED else ""
    )
    return run.check(
        kind="suite",
        passed=False,
        blocking=True,
        message=f"{run.label}: {len(gone)} judged queries of the baseline are gone from this "
        f"run's suite ({named}): a query dropped from the qrels counts against the run, never "
        "out of it; restore its judgments, or review the run and re-record the baseline: "
        + run.update_command("--force", '--note "queries dropped"'),
    )
