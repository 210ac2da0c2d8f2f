"""What the suite can tell, on the first screen: per compared measure its paired delta and
interval (the primary measure's always, improvements and changes within the band included), the
band, the drop the suite fails with 80% power under the gate's rule, and the queries that would
resolve the band (core/gate/decision.py, docs/gate.md "The decision"); for each measure decided
with PPI, its human-only and PPI++ intervals side by side with the effective sample size."""

from __future__ import annotations

from collections.abc import Iterable

from rageval_pipeline.core.gate import Check, Verdict
from rageval_pipeline.core.gate.decision import MIN_PASS_QUERIES, llm_judged, queries_text
from rageval_pipeline.core.report.blocks import Block, Heading, Para, Table, Tone
from rageval_pipeline.core.statistics.paired import PairedTest


def ci_label(checks: Iterable[Check]) -> str:
    """`95% CI`, `90% CI`: the level of the paired intervals shown, 1 - the policy's alpha
    (`CI` alone when the runs shown were decided at different levels)."""
    levels = {c.paired.level for c in checks if c.paired is not None and c.paired.level}
    return f"{levels.pop() * 100:.3g}% CI" if len(levels) == 1 else "CI"


def _header(ci: str) -> tuple[str, ...]:
    return (
        "Run",
        "Measure",
        f"Delta [{ci}]",
        "Band",
        "Detectable drop (80% power)",
        "Queries",
        "To resolve the band",
    )


def _ppi_header(ci: str) -> tuple[str, ...]:
    return (
        "Run",
        "Measure",
        f"Human-only delta [{ci}]",
        "Human-judged",
        f"PPI++ delta [{ci}]",
        "LLM-judged",
        "Effective n",
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
    assert check.paired is not None
    return _interval(check.paired)


def _interval(test: PairedTest) -> str:
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
    if res.floor:
        return f"the {MIN_PASS_QUERIES}-query floor decided: add {queries_text(res.floor)}"
    if res.resolves:
        return "resolved"
    if res.needed is None:
        return "never (a band of 0)"
    return (
        f"about {res.needed} queries (+{max(res.needed - res.queries, 0)}), or "
        f"{res.needed_ppi or 0} human- and {llm_judged(res)} LLM-judged with PPI"
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


def _ppi_row(check: Check) -> tuple[str, ...]:
    test = check.paired
    assert test is not None and test.human_only is not None and test.effective_n is not None
    return (
        f"{check.dataset}/{check.system}",
        check.measure or "",
        _interval(test.human_only),
        str(test.human_only.n),
        _interval(test),
        str(test.n),
        f"{test.effective_n:.0f}",
    )


def _ppi_blocks(checks: list[Check]) -> list[Block]:
    """The measures decided with PPI: both intervals, and what the LLM-judged queries are worth."""
    ppi = [c for c in checks if c.paired is not None and c.paired.human_only is not None]
    if not ppi:
        return []
    note = (
        "Decided with PPI (statistics.rule: ppi): the PPI++ interval over every LLM-judged "
        "query, the judge's bias corrected on the random human-judged sample, is as narrow as "
        "the human-only one would be on the effective n human-judged queries."
    )
    rows, tones = [_ppi_row(c) for c in ppi], [_tone(c) for c in ppi]
    return [Table(_ppi_header(ci_label(ppi)), rows, tones), Para(note)]


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
    table = Table(_header(ci_label(checks)), rows, [_tone(c) for c in checks]).compact()
    return [*blocks, table, Para(note), *_ppi_blocks(checks)]
