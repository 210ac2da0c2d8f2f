"""Read evaluated runs back from the warehouse as the gate's `RunSummary` models."""

from __future__ import annotations

import json

import pandas as pd

from rageval_pipeline.core.aggregate import LATENCY_STATS
from rageval_pipeline.core.gate import RunSummary
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.storage import Warehouse

_LATEST = """
SELECT * FROM runs
QUALIFY row_number() OVER (PARTITION BY dataset, split, system ORDER BY created_at DESC) = 1
ORDER BY dataset, split, system
"""


def select_runs(
    warehouse: Warehouse,
    *,
    dagster_run_id: str | None = None,
    dataset: str | None = None,
    system: str | None = None,
    run_id: str | None = None,
) -> pd.DataFrame:
    """Runs to judge: one explicit run, or those of one Dagster run, or the latest of each
    (dataset, split, system); optionally narrowed to one dataset and/or system."""
    if run_id is not None:
        runs = warehouse.query("SELECT * FROM runs WHERE run_id = ?", [run_id])
    elif dagster_run_id is not None:
        runs = warehouse.query(
            "SELECT * FROM runs WHERE dagster_run_id = ? ORDER BY dataset, split, system",
            [dagster_run_id],
        )
    else:
        runs = warehouse.query(_LATEST)
    if dataset is not None:
        runs = runs[runs["dataset"] == dataset]
    if system is not None:
        runs = runs[runs["system"] == system]
    return runs.reset_index(drop=True)


def _intervals(means: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """measure -> (ci_low, ci_high) where both are known (runs stored before them have none)."""
    known = means.dropna(subset=["ci_low", "ci_high"])
    return {r.measure: (float(r.ci_low), float(r.ci_high)) for r in known.itertuples(index=False)}


def summaries(warehouse: Warehouse, runs: pd.DataFrame) -> list[RunSummary]:
    """One RunSummary per row of `runs` (as returned by `select_runs`)."""
    if runs.empty:
        return []
    ids = runs["run_id"].tolist()
    marks = ", ".join("?" * len(ids))
    means = warehouse.query(f"SELECT * FROM run_metrics WHERE run_id IN ({marks})", ids)
    per_query = warehouse.query(f"SELECT * FROM query_metrics WHERE run_id IN ({marks})", ids)
    latency = warehouse.query(f"SELECT * FROM latency WHERE run_id IN ({marks})", ids)
    rankings = warehouse.query(
        f"SELECT * FROM rankings WHERE run_id IN ({marks}) ORDER BY query_id, rank", ids
    )
    out = []
    for run in runs.itertuples(index=False):
        pq = per_query[per_query["run_id"] == run.run_id]
        lat = latency[latency["run_id"] == run.run_id]
        groups: dict[str, dict[str, float]] = {}
        counts: dict[str, int] = {}
        for row in lat.itertuples(index=False):
            key = "all" if row.attribute == "all" else f"{row.attribute}={row.group}"
            if row.stat == "count":
                counts[key] = int(row.value)
            elif row.stat in LATENCY_STATS:
                groups.setdefault(key, {})[row.stat] = float(row.value)
        top: dict[str, list[dict]] = {}
        for row in rankings[rankings["run_id"] == run.run_id].itertuples(index=False):
            grade = None if pd.isna(row.grade) else int(row.grade)
            top.setdefault(row.query_id, []).append(dict(id=row.doc_id, grade=grade))
        queries: dict[str, dict[str, float]] = {}
        for row in pq.itertuples(index=False):
            queries.setdefault(row.query_id, {})[row.measure] = round_metric(row.value)
        out.append(
            RunSummary(
                dataset=run.dataset,
                split=run.split,
                system=run.system,
                fingerprint=run.fingerprint,
                run_id=run.run_id,
                created_at=pd.Timestamp(run.created_at).isoformat(),
                # At the baselines' precision (they are stored rounded), so that rounding never
                # shows as a per-query change or a "regression" of -0.0000001.
                measures={
                    r.measure: round_metric(r.value)
                    for r in means[means["run_id"] == run.run_id].itertuples(index=False)
                },
                per_query=queries,
                intervals=_intervals(means[means["run_id"] == run.run_id]),
                latency=groups,
                latency_queries=counts,
                n_queries=int(run.n_queries),
                k=int(run.k) if pd.notna(run.k) else None,
                config=json.loads(run.config) if isinstance(run.config, str) else None,
                top=top,
            )
        )
    return out
