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
from rageval_pipeline.core.gate.comparable import ideal_bound, own_passages
from rageval_pipeline.core.measures.names import sort_key, try_parse
from rageval_pipeline.core.report.explain import (
    QueryChange,
    changed_queries,
    explained_measure,
    query_deltas,
    recommendations,
)
from rageval_pipeline.core.report.glossary import Entry, glossary
from rageval_pipeline.core.report.plots import Figure
from rageval_pipeline.core.report.texts import ReportTexts

RunKey = tuple[str, str, str]  # dataset, split, system
LATENCY_KINDS = frozenset({"latency", "latency_baseline"})  # their `measure` is a statistic


class Cell(BaseModel):
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    baseline: float | None = None
    delta: float | None = None
    passed: bool | None = None  # the baseline check's outcome (None: not compared)
    inconclusive: bool = False  # beyond tolerance, but not told apart from noise
    # A measure whose ideal list holds only a system's own retrieved passages (gate.comparable)
    not_comparable: bool = False


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
    # dataset -> query id -> text, of the queries the verdict lists as worst
    query_texts: dict[str, dict[str, str]] = Field(default_factory=dict)
    glossary: list[Entry] = Field(default_factory=list)

    def query_text(self, dataset: str, query_id: str) -> str | None:
        return self.query_texts.get(dataset, {}).get(query_id)


def _compared(verdict: Verdict) -> list[str]:
    """Measures compared with a baseline, deciding or watched (else every measure a check
    names), in name order."""
    kinds = (
        {"baseline", "watched"}
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
    if own_passages(summary) and ideal_bound(try_parse(measure)):
        return Cell(not_comparable=True)
    checks = [
        c
        for c in verdict.checks
        if (c.dataset, c.split, c.system) == key
        and c.measure == measure
        and c.value is not None
        and c.kind in {"baseline", "watched", "threshold", "target", "value"}
    ]
    against = next((c for c in checks if c.kind in ("baseline", "watched")), None)
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
    summary: RunSummary, baseline: Baseline | None, measures: list[str], measure: str | None
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


def iso_date(stamp: object) -> str:
    """An ISO-8601 timestamp with its timezone; a naive one (DuckDB's TIMESTAMP, written in
    UTC) is UTC. "" stays "" (a verdict that judged nothing has no date)."""
    if stamp in ("", None):
        return ""
    moment = pd.Timestamp(stamp)
    moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment
    return moment.isoformat(timespec="seconds")


def _trend_figures(history: pd.DataFrame, measures: list[str], keys: list[RunKey]) -> list[Figure]:
    """Per judged run with two evaluations or more, each measure over its system's evaluations
    in time, with the times its configuration (fingerprint) changed from the evaluation before.
    One evaluation is no trend (its values are the measures figure's), and drawing a panel a
    compared measure (27 on techdocs) was half of a fresh storage's gate step (bench/README.md,
    "The gate's figures")."""
    figures = []
    for dataset, split, system in keys:
        rows = history[
            (history["dataset"] == dataset)
            & (history["split"] == split)
            & (history["system"] == system)
            & history["measure"].isin(measures)
        ].sort_values(["created_at", "measure"])
        if rows["run_id"].nunique() < 2:
            continue
        series: dict[str, list] = {m: [] for m in measures if m in set(rows["measure"])}
        for r in rows.itertuples(index=False):
            series[r.measure].append([iso_date(r.created_at), float(r.value)])
        runs = rows.drop_duplicates("run_id")  # one row per evaluation, oldest first
        changes, before = [], None
        for r in runs.itertuples(index=False):
            if before is not None and r.fingerprint != before:
                changes.append(iso_date(r.created_at))
            before = r.fingerprint
        figures.append(
            Figure(
                name=_stem("trend", (dataset, split, system)),
                title=f"{dataset}/{system}: measures over evaluation time "
                "(dashed: the configuration changed)",
                kind="trend",
                data=dict(measures=series, changes=changes),
            )
        )
    return figures


def _shown_measures(verdict: Verdict, summaries: list[RunSummary]) -> set[str]:
    named = {c.measure for c in verdict.checks if c.measure and c.kind not in LATENCY_KINDS}
    return named | {m for s in summaries for m in s.measures}


def build_report(
    verdict: Verdict,
    summaries: list[RunSummary] = (),
    baselines: dict[tuple[str, str], Baseline] | None = None,
    history: pd.DataFrame | None = None,
    texts: ReportTexts | None = None,
) -> Report:
    """The report of a verdict; `summaries`, `baselines`, `history` (the warehouse's `history`
    view: created_at, dataset, split, system, fingerprint, run_id, measure, value) and `texts`
    (query texts and target snippets, `report_texts`) add the tables, explanations and plots
    beyond the verdict itself."""
    baselines, texts = baselines or {}, texts or ReportTexts()
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
        glossary=glossary(_shown_measures(verdict, list(summaries))),
    )
    for w in verdict.worst_queries:
        if (text := texts.query(w.dataset, w.query_id)) is not None:
            report.query_texts.setdefault(w.dataset, {})[w.query_id] = text
    for key in keys:
        section = RunSection(dataset=key[0], split=key[1], system=key[2])
        summary = by_key.get(key)
        if summary is not None:
            baseline = baselines.get((key[0], key[2]))
            if baseline is not None and baseline.split != key[1]:
                baseline = None
            explained = explained_measure(verdict, summary, baseline)
            section.lost, section.gained = changed_queries(summary, baseline, explained, texts)
            section.recommendations = recommendations(summary, baseline, verdict)
            figures = _run_figures(summary, baseline, measures, explained)
            section.figures = [f.name for f in figures]
            report.figures += figures
        report.runs.append(section)
    if history is not None and not history.empty:
        # Every compared measure, and the watched ones that moved (R@100 when recall fell).
        watched = {
            c.measure
            for c in verdict.checks
            if c.kind == "watched" and c.measure and (not c.passed or c.improved)
        }
        trended = measures + sorted(watched - set(measures), key=sort_key)
        trends = _trend_figures(history, trended, keys)
        for section in report.runs:
            stem = _stem("trend", (section.dataset, section.split, section.system))
            section.figures += [f.name for f in trends if f.name == stem]
        report.figures += trends
    return report
