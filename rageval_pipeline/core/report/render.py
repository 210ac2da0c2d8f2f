"""The report document: the summary first (`core.report.summary`), then each run's details
folded, the systems side by side, every failure and warning, and the glossary.

One list of blocks (`core.report.blocks`) is rendered as Markdown and as HTML.
"""

from __future__ import annotations

from collections.abc import Collection

from rageval_pipeline.core.gate import (
    LATENCY_STATS,
    MEASURE_KINDS,
    OVERALL,
    Check,
    QueryRegression,
)
from rageval_pipeline.core.measures.names import sort_key
from rageval_pipeline.core.report import blocks
from rageval_pipeline.core.report.blocks import (
    Block,
    Bullets,
    Details,
    Figure,
    Heading,
    Para,
    Table,
    Tone,
)
from rageval_pipeline.core.report.explain import QueryChange
from rageval_pipeline.core.report.model import LATENCY_KINDS, Cell, Report, RunSection
from rageval_pipeline.core.report.states import headline, limit, number, run_state
from rageval_pipeline.core.report.states import status as summary_status
from rageval_pipeline.core.report.summary import summary_blocks

_LABEL: dict[Tone, str] = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "better": "IMPROVED"}
_TABLE_KINDS = MEASURE_KINDS | LATENCY_KINDS | {"value"}


def _tone(checks: list[Check]) -> Tone:
    if any(not c.passed and c.blocking for c in checks):
        return "fail"
    if any(not c.passed for c in checks):
        return "warn"
    return "better" if any(c.improved for c in checks) else "pass"


def _interval(low: float | None, high: float | None, signed: bool = False) -> str:
    if low is None or high is None:
        return ""
    digits = "+.4f" if signed else ".4f"
    return f" [{low:{digits}}, {high:{digits}}]"


def _paired_cells(check: Check | None) -> tuple[str, str, str]:
    """Delta [CI] | p (Holm) | MDE of a comparison with the baseline."""
    test = check.paired if check is not None else None
    if test is None:
        return "–", "–", "–"
    delta = f"{test.delta:+.4f}{_interval(test.ci_low, test.ci_high, signed=True)}"
    p = "–" if test.p_holm is None else f"{test.p_holm:.3g}"
    mde = "–" if test.mde is None else f"{test.mde:.4f}"
    return delta, p, mde


def _metric_row(label: str, checks: list[Check]) -> tuple[tuple[str, ...], Tone]:
    """Metric | Current [CI] | Baseline | Delta [CI] | p | MDE | Threshold | Status of a measure."""
    against_baseline = [c for c in checks if c.kind in {"baseline", "watched", "latency_baseline"}]
    limits = [c for c in checks if c.kind in {"threshold", "target", "latency"}]
    current = next((c for c in checks if c.value is not None), checks[0])
    baseline = against_baseline[0] if against_baseline else None
    tone = _tone(checks)
    # The label the first screen gives the check that decides the row (summary.status).
    deciding = [c for c in checks if not c.passed or c.improved]
    ranked = sorted(deciding, key=lambda c: (c.passed, not c.blocking))
    status = summary_status(ranked[0])[0] if ranked else _LABEL[tone]
    if baseline is not None and baseline.relative_delta is not None:
        status += f" ({baseline.relative_delta:+.1%})"
    row = (
        label,
        number(current, current.value) + _interval(current.ci_low, current.ci_high),
        number(baseline, baseline.reference) if baseline else "–",
        *_paired_cells(baseline),
        ", ".join(limit(c) for c in limits) or "–",
        status,
    )
    return row, tone


_METRIC_HEADER = (
    "Metric",
    "Current [95% CI]",
    "Baseline",
    "Delta [CI]",
    "p (Holm)",
    "MDE",
    "Threshold",
    "Status",
)


def _run_tables(checks: list[Check]) -> list[Block]:
    """The compared measures and latency (columns no row fills left out), then the measures
    only reported as values, folded."""
    quality: dict[str, list[Check]] = {}
    values: dict[str, list[Check]] = {}
    latency: dict[tuple[str, str], list[Check]] = {}
    for check in checks:
        if check.kind in MEASURE_KINDS and check.measure:
            quality.setdefault(check.measure, []).append(check)
        elif check.kind == "value" and check.measure:
            values.setdefault(check.measure, []).append(check)
        elif check.kind in LATENCY_KINDS and check.measure and check.group:
            latency.setdefault((check.group, check.measure), []).append(check)
    order = sorted(latency, key=lambda k: (k[0] != OVERALL, k[0], LATENCY_STATS.index(k[1])))
    out: list[Block] = []
    # Measures and latency apart: each table then drops the columns none of its rows fill.
    for rows in (
        [_metric_row(m, quality[m]) for m in sorted(quality, key=sort_key)],
        [_metric_row(f"Latency {s} [{g}]", latency[(g, s)]) for g, s in order],
    ):
        if rows:
            table = Table(_METRIC_HEADER, [r for r, _ in rows], [t for _, t in rows])
            out.append(table.compact())
    if values:
        shown = [
            (m, number(c, c.value) + _interval(c.ci_low, c.ci_high))
            for m in sorted(values, key=sort_key)
            for c in values[m][:1]
        ]
        out.append(
            Details(
                f"Other measures ({len(shown)}, not compared with a baseline)",
                [Table(("Measure", "Value [95% CI]"), shown)],
            )
        )
    return out


def _worst_table(worst: list[QueryRegression], report: Report) -> Table:
    return Table(
        ("Query", "Measure", "Baseline", "Current", "Delta", "Text"),
        [
            (
                w.query_id,
                w.measure,
                f"{w.baseline:.4f}",
                f"{w.value:.4f}",
                f"{w.delta:+.4f}",
                report.query_text(w.dataset, w.query_id) or "–",
            )
            for w in worst
        ],
        ["fail"] * len(worst),
    )


def _tagged(check: Check) -> str:
    tag = check.category or ("inconclusive" if check.inconclusive else None)
    return f"[{tag}] {check.message}" if tag else check.message


def _systems_cell(cell: Cell) -> str:
    if cell.not_comparable:
        return "n/c (own passages)"
    if cell.value is None:
        return "–"
    text = f"{cell.value:.4f}{_interval(cell.ci_low, cell.ci_high)}"
    if cell.delta is not None:
        flag = ", INCONCLUSIVE" if cell.inconclusive else ("" if cell.passed else ", FAIL")
        text += f" ({cell.delta:+.4f}{flag})"
    return text


def _systems_table(report: Report) -> Table:
    tones: list[Tone | None] = [
        "fail"
        if any(c.passed is False and not c.inconclusive for c in row.cells)
        else ("warn" if any(c.inconclusive for c in row.cells) else None)
        for row in report.rows
    ]
    return Table(
        ("Measure", *report.columns),
        [(row.measure, *(_systems_cell(c) for c in row.cells)) for row in report.rows],
        tones,
    )


def _grade(grade: int | None) -> str:
    return "unjudged" if grade is None else str(grade)


def _change_blocks(title: str, changes: list[QueryChange]) -> list[Block]:
    """Per query: its text, its measure's move, and the relevant targets that entered or left
    the top 10 with grade and snippet; the other ids are only counted."""
    if not changes:
        return []
    out: list[Block] = [Heading(4, title)]
    for c in changes:
        said = f' "{c.text}"' if c.text else ""
        out.append(
            Para(
                f"{c.query_id}{said}: {c.measure} {c.baseline:.4f} -> {c.value:.4f} "
                f"({c.delta:+.4f})"
            )
        )
        rows = [
            (way, d.id, _grade(d.grade), c.snippets.get(d.id, "–"))
            for way, listed in (("entered", c.relevant_entered), ("left", c.relevant_left))
            for d in listed
        ]
        if rows:
            out.append(Table(("Top 10", "Relevant target", "Grade", "Snippet"), rows))
        others = len(c.entered) + len(c.left) - len(rows)
        relevant = {d.id for d in c.current if (d.grade or 0) > 0}
        moves = [f"{m.id} {m.before}->{m.after}" for m in c.moves if m.id in relevant]
        notes = [f"{others} non-relevant or unjudged target(s) entered or left"] if others else []
        notes += [f"relevant targets that moved: {', '.join(moves)}"] if moves else []
        out += [Bullets(notes)] if notes else []
    return out


def _run_details(report: Report, section: RunSection, drawn: Collection[str]) -> Details:
    verdict = report.verdict
    key = (section.dataset, section.split, section.system)
    checks = [c for c in verdict.checks if (c.dataset, c.split, c.system) == key]
    notes = [c for c in checks if c.kind not in _TABLE_KINDS]
    titles = {f.name: f.title for f in report.figures}
    inner: list[Block] = [*_run_tables(checks)]
    if notes:
        inner.append(Bullets([f"{_LABEL[_tone([c])]} {c.message}" for c in notes]))
    # Only queries that actually got worse are regressions.
    worst = [
        w for w in verdict.worst_queries if (w.dataset, w.split, w.system) == key and w.delta < 0
    ]
    if worst:
        inner += [Heading(3, "Worst per-query regressions"), _worst_table(worst, report)]
    inner += _change_blocks("Queries that lost most", section.lost)
    inner += _change_blocks("Queries that gained most", section.gained)
    if section.recommendations:
        inner += [Heading(3, "Recommendations"), Bullets(section.recommendations)]
    # Only figures drawn: a report written before its figures shows no Plots, not broken images.
    if shown := [n for n in section.figures if n in drawn]:
        inner += [Heading(3, "Plots"), *(Figure(n, titles[n]) for n in shown)]
    state, _ = run_state(checks)
    return Details(f"{' / '.join(key)}: {state}", inner)


def _blocks(report: Report, drawn: Collection[str]) -> list[Block]:
    verdict = report.verdict
    out = summary_blocks(report)
    out.append(Heading(2, "Details"))
    sections = {(r.dataset, r.split, r.system): r for r in report.runs}
    for key in verdict.runs:
        section = sections.get(key) or RunSection(dataset=key[0], split=key[1], system=key[2])
        out.append(_run_details(report, section, drawn))
    if report.rows:
        out.append(Details("Systems side by side", [_systems_table(report)]))
    failures, warnings = verdict.failures, verdict.warnings
    out.append(
        Details(
            f"Every failure ({len(failures)}) and warning ({len(warnings)})",
            [Bullets([_tagged(c) for c in failures + warnings])]
            if failures or warnings
            else [Para("Nothing failed.")],
        )
    )
    if report.glossary:
        terms = [(e.term, e.meaning) for e in report.glossary]
        out.append(Details("Glossary", [Table(("Term", "Meaning"), terms)]))
    return out


def to_markdown(report: Report, drawn: Collection[str]) -> str:
    """The Markdown report: the summary, then each run's details folded (`<details>`), the
    systems side by side, every failure and warning and the glossary; the figures named in
    `drawn` linked (`plots/<name>.svg`)."""
    return blocks.to_markdown(_blocks(report, drawn))


def to_html(report: Report, svgs: dict[str, str]) -> str:
    """The same document as a self-contained HTML page (`blocks.to_html`), with the figures
    in `svgs` inlined."""
    return blocks.to_html(headline(report.verdict)[0], _blocks(report, svgs), svgs)
