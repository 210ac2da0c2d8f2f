"""Judgment coverage: the share of unjudged documents in the top k, and unjudged_spike.

A system that retrieves documents nobody judged scores them as non-relevant, so its standard
measures drop whether or not its retrieval got worse. When the run's Judged@k fell by more than
the policy's `unjudged.drop` against the baseline, the check fails as `unjudged_spike` (blocking
only when `unjudged.blocking`), and the failing drops of the standard measures are relabelled
`unjudged_spike` too: they may be missing judgments. Condensed measures (`nDCG(judged)@10`)
rank judged documents only and keep their own label: a drop there is a real one.
"""

from __future__ import annotations

from rageval_pipeline.core.gate.evaluation import EPS, Evaluation
from rageval_pipeline.core.gate.models import Baseline, Check
from rageval_pipeline.core.measures.names import try_parse

_HINT = (
    "the drops below may be missing judgments rather than worse retrieval: judge the new "
    "documents or compare the condensed (judged) measures"
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
    passed = rise <= spec.drop + EPS
    relation = "within" if passed else "beyond"
    message = (
        f"{text}, baseline {before:.1%} ({spec.measure} {reference:.4f} -> {judged:.4f}, "
        f"{relation} the allowed fall of {spec.drop:g})"
    )
    return run.check(
        kind="unjudged",
        measure=name,
        value=share,
        reference=before,
        delta=rise,
        relative_delta=rise / before if before else None,
        ci_low=None,
        ci_high=None,
        passed=passed,
        blocking=spec.blocking,
        category=None if passed else "unjudged_spike",
        message=message if passed else f"{message}: {_HINT}",
    )


def _explained(check: Check) -> bool:
    """A failing drop of a measure that unjudged documents lower: standard qrels measures."""
    if check.passed or check.value is None:
        return False  # a measure the run did not compute is a configuration problem
    measure = try_parse(check.measure or "")
    if check.kind not in {"baseline", "spike", "watched"} or measure is None:
        return False
    return measure.USES_QRELS and measure.family != "coverage" and not measure.judged


def explain_drops(run: Evaluation, checks: list[Check], spike: Check | None) -> list[Check]:
    """When `spike` (the unjudged check) failed, the drops it explains carry its label and
    block only as it does."""
    if spike is None or spike.passed:
        return checks
    return [
        c.model_copy(
            update={
                "category": "unjudged_spike",
                "blocking": c.blocking and run.rules.unjudged.blocking,
                "message": f"{c.message} [may be missing judgments: unjudged_spike]",
            }
        )
        if _explained(c)
        else c
        for c in checks
    ]
