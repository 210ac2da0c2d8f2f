"""The one report model JSON, Markdown and HTML are rendered from.

`build_report` gathers the verdict, a side-by-side table of the systems (each compared measure
with its interval and delta against the baseline), per run the queries that lost and gained
most and the recommendations, and the plot data (measures against the baseline, per-query
differences, latency by intent, each measure's trend over the stored history).
"""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel, Field

from rageval_pipeline.core.gate import OVERALL, Baseline, RunSummary, Verdict
from rageval_pipeline.core.measures.names import sort_key
from rageval_pipeline.core.report.explain import (
    QueryChange,
    changed_queries,
    primary_measure,
    query_deltas,
    recommendations,
)
from rageval_pipeline.core.report.plots import Figure

RunKey = tuple[str, str, str]  # dataset, split, system


class Cell(BaseModel):
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    baseline: float | None = None
    delta: float | None = None
    passed: bool | None = None  # the baseline check's outcome (None: not compared)
    inconclusive: bool = False  # beyond tolerance, but not told apart from noise


class SystemsRow(BaseModel):
    measure: str
    cells: list[Cell]  # one per column of `Report.columns`


class RunSection(BaseModel):
    dataset: str
    split: str
    system: str
    lost: list[QueryChange] = Field(default_factory=list)
    gained: list[QueryChange] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)
    figures: list[str] = Field(default_factory=list)  # names in Report.figures


class Report(BaseModel):
    verdict: Verdict
    columns: list[str] = Field(default_factory=list)  # "dataset/system" per judged run
    rows: list[SystemsRow] = Field(default_factory=list)
    runs: list[RunSection] = Field(default_factory=list)
    figures: list[Figure] = Field(default_factory=list)


def _compared(verdict: Verdict) -> list[str]:
    """Measures compared with a baseline (else every measure a check names), in name order."""
    kinds = (
        {"baseline"}
        if any(c.kind == "baseline" for c in verdict.checks)
        else {
            "threshold",
            "target",
            "value",
        }
    )
    names = {c.measure for c in verdict.checks if c.kind in kinds and c.measure}
    return sorted(names, key=sort_key)


def _cell(verdict: Verdict, key: RunKey, measure: str, summary: RunSummary | None) -> Cell:
    checks = [
        c
        for c in verdict.checks
        if (c.dataset, c.split, c.system) == key
        and c.measure == measure
        and c.value is not None
        and c.kind in {"baseline", "threshold", "target", "value"}
    ]
    against = next((c for c in checks if c.kind == "baseline"), None)
    first = against or (checks[0] if checks else None)
    interval = summary.intervals.get(measure) if summary else None
    return Cell(
        value=first.value if first else None,
        ci_low=first.ci_low if first and first.ci_low is not None else (interval or (None,))[0],
        ci_high=first.ci_high
        if first and first.ci_high is not None
        else (interval or (None, None))[1],
        baseline=against.reference if against else None,
        delta=against.delta if against else None,
        passed=against.passed if against else None,
        inconclusive=bool(against and against.inconclusive),
    )


def _stem(kind: str, key: RunKey) -> str:
    return "-".join([kind, *key])


def _run_figures(
    summary: RunSummary, baseline: Baseline | None, measures: list[str]
) -> list[Figure]:
    key = (summary.dataset, summary.split, summary.system)
    label = f"{summary.dataset}/{summary.system}"
    shown = [m for m in measures if m in summary.measures]
    figures = [
        Figure(
            name=_stem("measures", key),
            title=f"{label}: current vs baseline (95% CI)",
            kind="measures",
            data=dict(
                measures=shown,
                current=[summary.measures[m] for m in shown],
                current_ci=[summary.intervals.get(m) for m in shown],
                baseline=[baseline.measures.get(m) if baseline else None for m in shown],
                baseline_ci=[baseline.intervals.get(m) if baseline else None for m in shown],
            ),
        )
    ]
    measure = primary_measure(summary, baseline)
    if baseline is not None and measure is not None:
        deltas = sorted(
            query_deltas(summary, baseline, measure).items(), key=lambda x: (x[1], x[0])
        )
        figures.append(
            Figure(
                name=_stem("per_query", key),
                title=f"{label}: per-query {measure} difference",
                kind="per_query",
                data=dict(
                    measure=measure,
                    queries=[q for q, _ in deltas],
                    delta=[d for _, d in deltas],
                ),
            )
        )
    groups = sorted(
        (g for g in summary.latency if g == OVERALL or g.startswith("intent=")),
        key=lambda g: (g != OVERALL, g),
    )
    if groups:
        stats = {s: [summary.latency[g].get(s, 0.0) for g in groups] for s in ("p50", "p95", "p99")}
        figures.append(
            Figure(
                name=_stem("latency", key),
                title=f"{label}: latency by intent",
                kind="latency",
                data=dict(groups=groups, **stats),
            )
        )
    return figures


# The measures a trend shows (at most six), in this order, when the report compares them.
TREND_MEASURES = ("nDCG@10", "R@100", "P@5", "RR", "AP", "R@10")


def _trend_figures(history: pd.DataFrame, measures: list[str], keys: list[RunKey]) -> list[Figure]:
    measures = [m for m in TREND_MEASURES if m in measures] or measures[:6]
    figures = []
    for dataset, split in dict.fromkeys((d, s) for d, s, _ in keys):
        rows = history[
            (history["dataset"] == dataset)
            & (history["split"] == split)
            & history["measure"].isin(measures)
        ].sort_values(["created_at", "system"])
        if rows.empty:
            continue
        series: dict[str, dict[str, list]] = {m: {} for m in measures if m in set(rows["measure"])}
        for r in rows.itertuples(index=False):
            stamp = pd.Timestamp(r.created_at).isoformat()
            series.setdefault(r.measure, {}).setdefault(r.system, []).append([stamp, r.value])
        figures.append(
            Figure(
                name=f"trend-{dataset}-{split}",
                title=f"{dataset}: measures over the stored history",
                kind="trend",
                data=dict(measures=series),
            )
        )
    return figures


def build_report(
    verdict: Verdict,
    summaries: list[RunSummary] = (),
    baselines: dict[tuple[str, str], Baseline] | None = None,
    history: pd.DataFrame | None = None,
) -> Report:
    """The report of a verdict; `summaries`, `baselines` and `history` (the warehouse's
    `history` view: created_at, dataset, split, system, measure, value) add the tables,
    explanations and plots beyond the verdict itself."""
    baselines = baselines or {}
    by_key = {(s.dataset, s.split, s.system): s for s in summaries}
    keys = verdict.runs
    measures = _compared(verdict)
    report = Report(
        verdict=verdict,
        columns=[f"{d}/{s}" for d, _, s in keys],
        rows=[
            SystemsRow(measure=m, cells=[_cell(verdict, k, m, by_key.get(k)) for k in keys])
            for m in measures
        ],
    )
    for key in keys:
        section = RunSection(dataset=key[0], split=key[1], system=key[2])
        summary = by_key.get(key)
        if summary is not None:
            baseline = baselines.get((key[0], key[2]))
            if baseline is not None and baseline.split != key[1]:
                baseline = None
            section.lost, section.gained = changed_queries(summary, baseline)
            section.recommendations = recommendations(summary, baseline, verdict)
            figures = _run_figures(summary, baseline, measures)
            section.figures = [f.name for f in figures]
            report.figures += figures
        report.runs.append(section)
    if history is not None and not history.empty:
        report.figures += _trend_figures(history, measures, keys)
    return report
