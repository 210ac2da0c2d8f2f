"""Reports people read: JSON, Markdown and HTML of one report model, with plots beside them.

`write_reports(report, directory, drawn=...)` writes `gate.json` (the verdict), `report.json`
(the whole model), `gate.md`, `gate.html` (self-contained: inline CSS and SVG) and, with the
figures `draw` made, `plots/<name>.svg`. The gate writes its reports without figures (so the
verdict never waits on matplotlib) and `draw_figures` adds them from `report.json` afterwards
(in the figures step after a PASS, in the gate step before it fails on a FAIL).
A bare `Verdict` is accepted wherever a report is and reported without the context
(summaries, baselines, history, texts) that adds the systems table, explanations and plots.
`report_texts` builds the query texts and target snippets the explanations show;
`write_index(reports_dir)` writes the index of every dataset's latest verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

from rageval_pipeline.core.gate import MEASURE_KINDS, Verdict
from rageval_pipeline.core.measures.defaults import primary_measure
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.report import render
from rageval_pipeline.core.report.index import write_index
from rageval_pipeline.core.report.model import Report, build_report
from rageval_pipeline.core.report.plots import drawing_version, render_cached
from rageval_pipeline.core.report.plots import render as render_figure
from rageval_pipeline.core.report.states import compared_with, run_state
from rageval_pipeline.core.report.texts import ReportTexts, listed_ids, report_texts
from rageval_pipeline.core.storage.files import atomic_dir
from rageval_pipeline.core.storage.location import as_location

_VALUE_KINDS = MEASURE_KINDS | {"value"}  # checks whose value is the run's mean of a measure
REPORT_FILES = {
    "json": "gate.json",
    "report": "report.json",
    "markdown": "gate.md",
    "html": "gate.html",
}
__all__ = [
    "REPORT_FILES",
    "Report",
    "ReportTexts",
    "build_report",
    "draw",
    "draw_figures",
    "drawing_version",
    "listed_ids",
    "plotted_values",
    "report_texts",
    "to_html",
    "to_json",
    "to_markdown",
    "write_index",
    "write_reports",
]


def to_json(verdict: Verdict) -> str:
    """The verdict with its derived fields (passed, categories, summary); sorted keys."""
    data = verdict.model_dump(mode="json")
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def plotted_values(verdict: Verdict) -> dict[str, float]:
    """Numbers a dashboard plots across gate runs, keyed "<dataset>/<system> <measure> <what>":
    per run its primary measure's paired delta, interval and Holm p-value (and those of every
    compared or watched measure that did not pass), and its share of unjudged documents; rounded by
    `round_metric`."""
    primary = {(c.dataset, c.system, c.measure) for c in verdict.checks if c.kind == "spike"}
    out: dict[str, float] = {}
    for c in verdict.checks:
        label = f"{c.dataset}/{c.system} {c.measure}"
        if c.kind == "unjudged" and c.value is not None:
            out[f"{c.dataset}/{c.system} unjudged share"] = round_metric(c.value)
        if c.kind not in ("baseline", "watched") or c.paired is None:
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


def _report(value: Report | Verdict) -> Report:
    return value if isinstance(value, Report) else build_report(value)


def to_markdown(value: Report | Verdict) -> str:
    """The Markdown report, every figure linked as `plots/<name>.svg`."""
    report = _report(value)
    return render.to_markdown(report, [f.name for f in report.figures])


def to_html(value: Report | Verdict) -> str:
    report = _report(value)
    return render.to_html(report, draw(report))


def draw(value: Report | Verdict, plot_cache: Path | None = None) -> dict[str, str]:
    """Each figure's SVG by name: drawn, or read from `plot_cache` when drawn before."""
    report = _report(value)
    if plot_cache is None:
        return {f.name: render_figure(f) for f in report.figures}
    return render_cached(report.figures, plot_cache)


def write_reports(
    value: Report | Verdict, directory: Path, *more: Path, drawn: dict[str, str] | None = None
) -> dict[str, Path]:
    """Write every rendering into `directory` (and each of `more`), each folder replaced whole
    in one step (with a manifest of its files' sizes); returns what -> path in `directory`.
    `drawn` (`draw`): the figures, written to `plots/` and shown; without it the reports have
    no Plots sections (not broken images) until `draw_figures` adds them."""
    report = _report(value)
    drawn = drawn or {}
    texts = {
        "json": to_json(report.verdict),
        "report": report.model_dump_json(indent=2) + "\n",
        "markdown": render.to_markdown(report, drawn),
        "html": render.to_html(report, drawn),
    }
    # Each folder whole or not at all: built aside and swapped in (a full disk or a kill
    # leaves no folder holding only some of the files), its plots only this report's.
    for folder in map(as_location, (directory, *more)):
        with atomic_dir(folder) as tmp:
            if drawn:
                (tmp / "plots").mkdir()
            for name, svg in drawn.items():
                (tmp / "plots" / f"{name}.svg").write_text(svg, encoding="utf-8", newline="\n")
            for what, text in texts.items():
                (tmp / REPORT_FILES[what]).write_text(text, encoding="utf-8", newline="\n")
    return {what: as_location(directory) / REPORT_FILES[what] for what in texts}


def draw_figures(directory: Path, *more: Path, plot_cache: Path) -> int:
    """Draw the figures of the report `write_reports` left in `directory` without them (from
    its `report.json`, through `plot_cache`) and rewrite that folder and each of `more` whole
    with them; returns how many were drawn. A folder whose `report.json` is no longer the one
    drawn (a later gate replaced `latest` meanwhile) is left as that gate wrote it."""
    source = as_location(directory) / REPORT_FILES["report"]
    text = source.read_text(encoding="utf-8")
    report = Report.model_validate_json(text)
    drawn = draw(report, plot_cache)
    if not drawn:  # nothing to add: the folders stay as written
        return 0
    folders = [f for f in map(as_location, (directory, *more)) if _holds(f, text)]
    if folders:
        write_reports(report, *folders, drawn=drawn)
    return len(drawn)


def _holds(folder: Path, text: str) -> bool:
    try:
        return (folder / REPORT_FILES["report"]).read_text(encoding="utf-8") == text
    except FileNotFoundError:
        return False


def short_summary(verdict: Verdict, directory: Path) -> str:
    """What `scripts/evaluate` prints: the verdict, one line per judged run, where the reports
    are."""
    lines = [f"Gate: {verdict.summary}"]
    changes = {(r.dataset, r.split, r.system): r for r in verdict.changes}
    for key in verdict.runs:
        checks = [c for c in verdict.checks if (c.dataset, c.split, c.system) == key]
        failed = [c for c in checks if c.blocking and not c.passed]
        valued = [c for c in checks if c.kind in _VALUE_KINDS and c.value is not None]
        measure = verdict.judged_by(key) or primary_measure(c.measure or "" for c in valued)
        primary = next((c for c in valued if c.measure == measure), None)
        shown = f"{primary.measure} {primary.value:.4f}" if primary else "no measure"
        if primary is not None and primary.delta is not None and primary.kind == "baseline":
            shown += f" ({primary.delta:+.4f} vs baseline)"
        state, _ = run_state(checks)  # the words of the report's verdict table
        state += f", {len(failed)} blocking" if failed else ""
        change = changes.get(key)
        level = f", {change.level} level" if change and change.level else ""  # scored on
        against = ""  # what the run was compared with
        if change is not None:
            words = compared_with(change)
            against = (
                f", {words}" if change.compared_with == "thresholds" else f", against the {words}"
            )
        lines.append(f"  {'/'.join(key)}: {state}, {shown}{level}{against}")
    lines.append(f"Reports: {directory}/gate.html (also gate.md, report.json, plots/)")
    return "\n".join(lines)
