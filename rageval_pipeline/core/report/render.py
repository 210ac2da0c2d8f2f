"""JSON, Markdown and HTML renderings of the report model (`core.report.model`).

Markdown and HTML render the same document, built once as a list of blocks, so the two never
disagree. Status labels are text (CSS badges in HTML), never emoji, so the page needs no emoji
font; figures are inline SVG, so it needs no network.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Literal

from rageval_pipeline.core.gate import LATENCY_STATS, OVERALL, Check, QueryRegression
from rageval_pipeline.core.measures.names import sort_key, try_parse
from rageval_pipeline.core.report.explain import QueryChange
from rageval_pipeline.core.report.model import Cell, Report, RunSection

Tone = Literal["pass", "fail", "warn"]
_LABEL: dict[Tone, str] = {"pass": "PASS", "fail": "FAIL", "warn": "ADVISORY"}
_INCONCLUSIVE = "INCONCLUSIVE"
_QUALITY_KINDS = frozenset({"threshold", "target", "baseline", "value"})
_LATENCY_KINDS = frozenset({"latency", "latency_baseline"})


# ------------------------------------------------------------------------------ document blocks


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str
    tone: Tone | None = None


@dataclass(frozen=True)
class _Para:
    text: str


@dataclass(frozen=True)
class _List:
    items: list[str]


@dataclass(frozen=True)
class _Table:
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    tones: list[Tone | None]


@dataclass(frozen=True)
class _Figure:
    name: str
    title: str


_Block = _Heading | _Para | _List | _Table | _Figure


def _tone(checks: list[Check]) -> Tone:
    if any(not c.passed and c.blocking for c in checks):
        return "fail"
    return "warn" if any(not c.passed for c in checks) else "pass"


def _number(check: Check, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f} ms" if check.kind in _LATENCY_KINDS else f"{value:.4f}"


def _limit(check: Check) -> str:
    """How a threshold, target or latency maximum reads in the Threshold column."""
    measure = try_parse(check.measure or "")
    at_least = check.kind != "latency" and (measure is None or measure.higher_is_better)
    text = f"{'≥' if at_least else '≤'} {_number(check, check.reference)}"
    return text + " (target)" if check.kind == "target" else text


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
    against_baseline = [c for c in checks if c.kind in {"baseline", "latency_baseline"}]
    limits = [c for c in checks if c.kind in {"threshold", "target", "latency"}]
    current = next((c for c in checks if c.value is not None), checks[0])
    baseline = against_baseline[0] if against_baseline else None
    tone = _tone(checks)
    status = _LABEL[tone]
    if any(c.inconclusive for c in checks) and tone != "fail":
        status = _INCONCLUSIVE
    if baseline is not None and baseline.relative_delta is not None:
        status += f" ({baseline.relative_delta:+.1%})"
    row = (
        label,
        _number(current, current.value) + _interval(current.ci_low, current.ci_high),
        _number(baseline, baseline.reference) if baseline else "–",
        *_paired_cells(baseline),
        ", ".join(_limit(c) for c in limits) or "–",
        status,
    )
    return row, tone


def _run_table(checks: list[Check]) -> _Table:
    quality: dict[str, list[Check]] = {}
    latency: dict[tuple[str, str], list[Check]] = {}
    for check in checks:
        if check.kind in _QUALITY_KINDS and check.measure:
            quality.setdefault(check.measure, []).append(check)
        elif check.kind in _LATENCY_KINDS and check.measure and check.group:
            latency.setdefault((check.group, check.measure), []).append(check)
    rows = [_metric_row(m, quality[m]) for m in sorted(quality, key=sort_key)]
    latency_order = sorted(
        latency, key=lambda k: (k[0] != OVERALL, k[0], LATENCY_STATS.index(k[1]))
    )
    rows += [_metric_row(f"Latency {s} [{g}]", latency[(g, s)]) for g, s in latency_order]
    return _Table(
        (
            "Metric",
            "Current [95% CI]",
            "Baseline",
            "Delta [CI]",
            "p (Holm)",
            "MDE",
            "Threshold",
            "Status",
        ),
        [row for row, _ in rows],
        [tone for _, tone in rows],
    )


def _worst_table(worst: list[QueryRegression]) -> _Table:
    return _Table(
        ("Query", "Measure", "Baseline", "Current", "Delta"),
        [
            (w.query_id, w.measure, f"{w.baseline:.4f}", f"{w.value:.4f}", f"{w.delta:+.4f}")
            for w in worst
        ],
        ["fail"] * len(worst),
    )


def _tagged(check: Check) -> str:
    tag = check.category or ("inconclusive" if check.inconclusive else None)
    return f"[{tag}] {check.message}" if tag else check.message


def _systems_cell(cell: Cell) -> str:
    if cell.value is None:
        return "–"
    text = f"{cell.value:.4f}{_interval(cell.ci_low, cell.ci_high)}"
    if cell.delta is not None:
        flag = ", inconclusive" if cell.inconclusive else ("" if cell.passed else ", FAIL")
        text += f" ({cell.delta:+.4f}{flag})"
    return text


def _systems_table(report: Report) -> _Table:
    tones: list[Tone | None] = [
        "fail"
        if any(c.passed is False and not c.inconclusive for c in row.cells)
        else ("warn" if any(c.inconclusive for c in row.cells) else None)
        for row in report.rows
    ]
    return _Table(
        ("Measure", *report.columns),
        [(row.measure, *(_systems_cell(c) for c in row.cells)) for row in report.rows],
        tones,
    )


def _listed(docs) -> str:
    return ", ".join(f"{d.id} ({'unjudged' if d.grade is None else d.grade})" for d in docs) or "–"


def _change_blocks(title: str, changes: list[QueryChange]) -> list[_Block]:
    if not changes:
        return []
    blocks: list[_Block] = [_Heading(3, title)]
    for c in changes:
        moves = ", ".join(f"{m.id} {m.before}->{m.after}" for m in c.moves) or "–"
        blocks.append(
            _Para(f"{c.query_id}: {c.measure} {c.baseline:.4f} -> {c.value:.4f} ({c.delta:+.4f})")
        )
        if not c.current and not c.previous:
            continue  # no stored lists (a run or baseline from before they were kept)
        blocks += [
            _Table(
                ("Rank", "Current (grade)", "Baseline (grade)"),
                [
                    (
                        str(i + 1),
                        _listed(c.current[i : i + 1]) if i < len(c.current) else "–",
                        _listed(c.previous[i : i + 1]) if i < len(c.previous) else "–",
                    )
                    for i in range(max(len(c.current), len(c.previous)))
                ],
                [None] * max(len(c.current), len(c.previous)),
            ),
            _List(
                [
                    f"entered the top 10: {_listed(c.entered)}",
                    f"left the top 10: {_listed(c.left)}",
                    f"rank moves: {moves}",
                ]
            ),
        ]
    return blocks


def _run_blocks(report: Report, section: RunSection) -> list[_Block]:
    verdict = report.verdict
    key = (section.dataset, section.split, section.system)
    checks = [c for c in verdict.checks if (c.dataset, c.split, c.system) == key]
    notes = [c for c in checks if c.kind not in _QUALITY_KINDS | _LATENCY_KINDS]
    titles = {f.name: f.title for f in report.figures}
    blocks: list[_Block] = [
        _Heading(2, " / ".join(key), _tone(checks)),
        _run_table(checks),
        _List([f"{_LABEL[_tone([c])]} {c.message}" for c in notes]),
    ]
    # Only queries that actually got worse are regressions.
    worst = [
        w for w in verdict.worst_queries if (w.dataset, w.split, w.system) == key and w.delta < 0
    ]
    if worst:
        blocks += [_Heading(3, "Worst per-query regressions"), _worst_table(worst)]
    blocks += _change_blocks("Queries that lost most", section.lost)
    blocks += _change_blocks("Queries that gained most", section.gained)
    if section.recommendations:
        blocks += [_Heading(3, "Recommendations"), _List(section.recommendations)]
    if section.figures:
        blocks += [_Heading(3, "Plots"), *(_Figure(n, titles[n]) for n in section.figures)]
    return blocks


def _blocks(report: Report) -> list[_Block]:
    verdict = report.verdict
    tone: Tone = "pass" if verdict.passed else "fail"
    failures, warnings = verdict.failures, verdict.warnings
    blocks: list[_Block] = [
        _Heading(1, f"Retrieval gate: {_LABEL[tone]}", tone),
        _Para(verdict.summary),
        _Para(f"Date: {verdict.created_at or '–'}"),
    ]
    if report.rows:
        blocks += [_Heading(2, "Systems side by side"), _systems_table(report)]
    blocks += [
        _Heading(2, f"What failed and why ({len(failures)})"),
        _List([_tagged(c) for c in failures]) if failures else _Para("Nothing failed."),
        _Heading(2, "Regression categories"),
        _List(list(verdict.categories)) if verdict.categories else _Para("None."),
    ]
    if warnings:
        blocks += [
            _Heading(2, f"Warnings ({len(warnings)})"),
            _List([_tagged(c) for c in warnings]),
        ]
    sections = {(r.dataset, r.split, r.system): r for r in report.runs}
    for key in verdict.runs:
        section = sections.get(key) or RunSection(dataset=key[0], split=key[1], system=key[2])
        blocks += _run_blocks(report, section)
    trends = [f for f in report.figures if f.kind == "trend"]
    if trends:
        blocks += [_Heading(2, "Trends"), *(_Figure(f.name, f.title) for f in trends)]
    return blocks


# ----------------------------------------------------------------------------------- renderings


def _md(text: str, *, cell: bool = False) -> str:
    """Keep text literal in Markdown: no raw HTML tags, no line breaks, no stray table pipes."""
    text = re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text.replace("\\", "\\\\"))
    text = " ".join(text.splitlines())
    return text.replace("|", "\\|") if cell else text


def _md_block(block: _Block) -> str:
    if isinstance(block, _Heading):
        return f"{'#' * block.level} {_md(block.text)}"
    if isinstance(block, _Para):
        return _md(block.text)
    if isinstance(block, _List):
        return "\n".join(f"- {_md(item)}" for item in block.items)
    if isinstance(block, _Figure):
        return f"![{_md(block.title)}](plots/{block.name}.svg)"
    lines = [block.header, tuple("---" for _ in block.header), *block.rows]
    return "\n".join("| " + " | ".join(_md(c, cell=True) for c in line) + " |" for line in lines)


def to_markdown(report: Report) -> str:
    """The Markdown report: verdict, systems side by side, failures, per run its table,
    explanations, recommendations and plots (as links to plots/*.svg)."""
    return "\n\n".join(_md_block(b) for b in _blocks(report)) + "\n"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1f2328; }
h1 { padding: 0.5rem 1rem; border-radius: 6px; color: #fff; }
h1.pass { background: #1a7f37; } h1.fail { background: #cf222e; }
h2.fail { color: #cf222e; } h2.warn { color: #9a6700; } h2.pass { color: #1a7f37; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f6f8fa; }
tr.fail td { background: #ffebe9; } tr.warn td { background: #fff8c5; }
figure { margin: 0.5rem 0 1.5rem; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #57606a; font-size: 0.9rem; }
"""


def _attr(tone: Tone | None) -> str:
    return f' class="{tone}"' if tone else ""


def _html_block(block: _Block, svgs: dict[str, str]) -> str:
    if isinstance(block, _Figure):
        return (
            f'<figure data-plot="{html.escape(block.name)}">{svgs[block.name]}'
            f"<figcaption>{html.escape(block.title)}</figcaption></figure>"
        )
    if isinstance(block, _Heading):
        tag = f"h{block.level}"
        return f"<{tag}{_attr(block.tone)}>{html.escape(block.text)}</{tag}>"
    if isinstance(block, _Para):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, _List):
        return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block.items) + "</ul>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in block.header)
    body = "".join(
        f"<tr{_attr(tone)}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row, tone in zip(block.rows, block.tones, strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# No request may leave the page: the browser refuses any that is not inline.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def to_html(report: Report, svgs: dict[str, str]) -> str:
    """A self-contained HTML page: inline CSS and SVG, no scripts or external assets (the CSP
    forbids them), all text escaped. `svgs` maps each figure's name to its SVG."""
    verdict = report.verdict
    title = html.escape(f"Retrieval gate: {'PASS' if verdict.passed else 'FAIL'}")
    body = "\n".join(_html_block(b, svgs) for b in _blocks(report))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
