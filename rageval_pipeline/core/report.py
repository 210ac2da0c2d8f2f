"""JSON, Markdown and HTML renderings of a gate verdict.

Markdown and HTML render the same document, built once as a list of blocks, so the two never
disagree. The verdict holds measures, messages and configuration fingerprints only (hashes), so
no report can leak a secret from a system's configuration.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rageval_pipeline.core.gate import (
    LATENCY_STATS,
    OVERALL,
    Check,
    QueryRegression,
    Verdict,
)
from rageval_pipeline.core.measures.names import sort_key, try_parse
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.storage import write_text

Tone = Literal["pass", "fail", "warn"]
_LABEL: dict[Tone, str] = {"pass": "✅ PASS", "fail": "❌ FAIL", "warn": "⚠️ advisory"}
_INCONCLUSIVE = "❔ inconclusive"
_QUALITY_KINDS = frozenset({"threshold", "target", "baseline", "value"})
_LATENCY_KINDS = frozenset({"latency", "latency_baseline"})
REPORT_FILES = {"json": "gate.json", "markdown": "gate.md", "html": "gate.html"}


def to_json(verdict: Verdict) -> str:
    """The verdict with its derived fields (passed, categories, summary); sorted keys."""
    data = verdict.model_dump(mode="json")
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def plotted_values(verdict: Verdict) -> dict[str, float]:
    """Numbers a dashboard plots across gate runs, keyed "<dataset>/<system> <measure> <what>":
    per run its primary measure's paired delta, interval and Holm p-value (and those of every
    measure that did not pass), and its share of unjudged documents; rounded by
    `round_metric`."""
    primary = {(c.dataset, c.system, c.measure) for c in verdict.checks if c.kind == "spike"}
    out: dict[str, float] = {}
    for c in verdict.checks:
        label = f"{c.dataset}/{c.system} {c.measure}"
        if c.kind == "unjudged" and c.value is not None:
            out[f"{c.dataset}/{c.system} unjudged share"] = round_metric(c.value)
        if c.kind != "baseline" or c.paired is None:
            continue
        if c.passed and (c.dataset, c.system, c.measure) not in primary:
            continue
        numbers = {
            "delta": c.paired.delta,
            "ci_low": c.paired.ci_low,
            "ci_high": c.paired.ci_high,
            "p_holm": c.paired.p_holm,
        }
        out |= {f"{label} {k}": round_metric(v) for k, v in numbers.items() if v is not None}
    return out


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


_Block = _Heading | _Para | _List | _Table


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


def _blocks(verdict: Verdict) -> list[_Block]:
    tone: Tone = "pass" if verdict.passed else "fail"
    failures, warnings = verdict.failures, verdict.warnings
    blocks: list[_Block] = [
        _Heading(1, f"Retrieval gate: {_LABEL[tone]}", tone),
        _Para(verdict.summary),
        _Para(f"Date: {verdict.created_at or '–'}"),
        _Heading(2, "Regression categories"),
        _List(list(verdict.categories)) if verdict.categories else _Para("None."),
        _Heading(2, f"Blocking failures ({len(failures)})"),
        _List([_tagged(c) for c in failures]) if failures else _Para("None."),
    ]
    if warnings:
        blocks += [
            _Heading(2, f"Warnings ({len(warnings)})"),
            _List([_tagged(c) for c in warnings]),
        ]
    for dataset, split, system in verdict.runs:
        checks = [
            c for c in verdict.checks if (c.dataset, c.split, c.system) == (dataset, split, system)
        ]
        notes = [c for c in checks if c.kind not in _QUALITY_KINDS | _LATENCY_KINDS]
        blocks += [
            _Heading(2, f"{dataset} / {split} / {system}", _tone(checks)),
            _run_table(checks),
            _List([f"{_LABEL[_tone([c])]} {c.message}" for c in notes]),
        ]
        worst = [
            w
            for w in verdict.worst_queries
            if (w.dataset, w.split, w.system) == (dataset, split, system)
        ]
        if worst:
            blocks += [_Heading(3, "Worst per-query regressions"), _worst_table(worst)]
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
    lines = [block.header, tuple("---" for _ in block.header), *block.rows]
    return "\n".join("| " + " | ".join(_md(c, cell=True) for c in line) + " |" for line in lines)


def to_markdown(verdict: Verdict) -> str:
    """A Markdown report: headline, taxonomy, failures, a metric table per run, worst queries."""
    return "\n\n".join(_md_block(b) for b in _blocks(verdict)) + "\n"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1f2328; }
h1 { padding: 0.5rem 1rem; border-radius: 6px; color: #fff; }
h1.pass { background: #1a7f37; } h1.fail { background: #cf222e; }
h2.fail { color: #cf222e; } h2.warn { color: #9a6700; } h2.pass { color: #1a7f37; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f6f8fa; }
tr.fail td { background: #ffebe9; } tr.warn td { background: #fff8c5; }
"""


def _attr(tone: Tone | None) -> str:
    return f' class="{tone}"' if tone else ""


def _html_block(block: _Block) -> str:
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


def to_html(verdict: Verdict) -> str:
    """A self-contained HTML page (inline CSS, no scripts or external assets), all text escaped."""
    title = html.escape(f"Retrieval gate: {'PASS' if verdict.passed else 'FAIL'}")
    body = "\n".join(_html_block(b) for b in _blocks(verdict))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def write_reports(verdict: Verdict, directory: Path) -> dict[str, Path]:
    """Write gate.json, gate.md and gate.html atomically; returns format -> path."""
    renderers = {"json": to_json, "markdown": to_markdown, "html": to_html}
    paths = {}
    for fmt, render in renderers.items():
        path = Path(directory) / REPORT_FILES[fmt]
        write_text(path, render(verdict))
        paths[fmt] = path
    return paths
