"""What the suite can tell, on the first screen: per compared measure its paired delta and
interval (the primary measure's always, improvements and changes within the band included), the
band, the drop the suite fails with 80% power under the gate's rule, and the queries that would
resolve the band (core/gate/decision.py, docs/gate.md "The decision")."""

from __future__ import annotations

from rageval_pipeline.core.gate import Check, Verdict
from rageval_pipeline.core.gate.decision import PPI_LLM_PER_HUMAN
from rageval_pipeline.core.report.blocks import Block, Heading, Para, Table, Tone

_HEADER = (
    "Run",
    "Measure",
    "Delta [95% CI]",
    "Band",
    "Detectable drop (80% power)",
    "Queries",
    "To resolve the band",
)


def compared(verdict: Verdict) -> list[Check]:
    """Each run's compared measures with per-query statistics, its primary measure first."""
    out = []
    for key in verdict.runs:
        primary = verdict.judged_by(key)
        checks = [
            c
            for c in verdict.checks
            if (c.dataset, c.split, c.system) == key and c.kind == "baseline" and c.paired
        ]
        out += sorted(checks, key=lambda c: c.measure != primary)
    return out


def interval(check: Check) -> str:
    """`+0.0230 [+0.0051, +0.0410]`: the paired delta and its interval."""
    test = check.paired
    assert test is not None
    if test.ci_low is None or test.ci_high is None:
        return f"{test.delta:+.4f}"
    return f"{test.delta:+.4f} [{test.ci_low:+.4f}, {test.ci_high:+.4f}]"


def _unmoved(check: Check) -> bool:
    """No query moved: the paired differences have no spread, so what the suite could detect
    is unknown (a change that moves queries will say)."""
    res = check.resolution
    return res is not None and res.detectable - res.band <= 1e-9


def _gap(check: Check) -> str:
    res = check.resolution
    if res is None:
        return "–"
    if _unmoved(check):
        return "no query moved: known once a change moves some"
    if res.resolves:
        return "resolved"
    if res.needed is None:
        return "never (a band of 0)"
    ppi = res.needed_ppi or 0
    return (
        f"about {res.needed} queries (+{max(res.needed - res.queries, 0)}), or {ppi} human- "
        f"and {ppi * PPI_LLM_PER_HUMAN} LLM-judged with PPI"
    )


def _row(check: Check) -> tuple[str, ...]:
    res = check.resolution
    return (
        f"{check.dataset}/{check.system}",
        check.measure or "",
        interval(check),
        "–" if res is None else f"{res.band:.4f}",
        "–" if res is None or _unmoved(check) else f"{res.detectable:.4f}",
        "–" if res is None else str(res.queries),
        _gap(check),
    )


def _tone(check: Check) -> Tone | None:
    if check.blocking and not check.passed:
        return "fail"
    if check.inconclusive:
        return "warn"
    return "better" if check.improved else None


def resolution_blocks(verdict: Verdict) -> list[Block]:
    checks = compared(verdict)
    blocks: list[Block] = [Heading(2, "What this suite can tell")]
    if not checks:
        return [*blocks, Para("No measure was compared with a baseline query by query.")]
    note = (
        "Passes when the interval's low end is above minus the band, fails when its high end "
        "is below; until the suite resolves the band, a change there is inconclusive."
    )
    rows = [_row(c) for c in checks]
    return [*blocks, Table(_HEADER, rows, [_tone(c) for c in checks]).compact(), Para(note)]
