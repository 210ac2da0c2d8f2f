"""Read evaluated runs back from the warehouse as the gate's `RunSummary` models."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rageval_pipeline.core.gate import Rerun, RunSummary
from rageval_pipeline.core.measures.aggregate import LATENCY_STATS, PAIRED
from rageval_pipeline.core.numbers import round_metrics
from rageval_pipeline.core.results.ppi_tables import HUMAN, LLM
from rageval_pipeline.core.results.store import RunResults
from rageval_pipeline.core.statistics.sampling import HumanSample
from rageval_pipeline.core.storage.base import BaseWarehouse

# Only finished runs (`runs.finished`): a step killed after its commit left the others.
_LATEST = """
SELECT * FROM runs WHERE finished
QUALIFY row_number() OVER (PARTITION BY dataset, split, system ORDER BY created_at DESC) = 1
ORDER BY dataset, split, system
"""


_HAS_TABLE = "SELECT count(*) FROM information_schema.tables WHERE table_name = ?"


def select_runs(
    warehouse: BaseWarehouse,
    *,
    dagster_run_id: str | None = None,
    dataset: str | None = None,
    system: str | None = None,
    run_id: str | None = None,
) -> pd.DataFrame:
    """Finished runs to check: one explicit run, or those a Dagster run measured or reused, or
    the latest of each (dataset, split, system); optionally narrowed to one dataset and/or
    system."""
    if run_id is not None:
        runs = warehouse.query("SELECT * FROM runs WHERE run_id = ? AND finished", [run_id])
    elif dagster_run_id is not None:
        # Runs it measured, and stored runs it reused (their inputs and code were unchanged;
        # a warehouse written before reuse has no run_reuses table).
        where, params = "dagster_run_id = ?", [dagster_run_id]
        with warehouse.read() as con:
            if con.execute(_HAS_TABLE, ["run_reuses"]).fetchone()[0]:
                where += " OR run_id IN (SELECT run_id FROM run_reuses WHERE dagster_run_id = ?)"
                params.append(dagster_run_id)
            sql = f"SELECT * FROM runs WHERE finished AND ({where}) ORDER BY dataset, split, system"
            runs = con.execute(sql, params).df()
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
    low, high = known["ci_low"].astype(float).tolist(), known["ci_high"].astype(float).tolist()
    return dict(zip(known["measure"], zip(low, high, strict=True), strict=True))


def _groups(keys: pd.Series) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """The row order that brings each key's rows together (keys in order of first appearance,
    rows in their order), and each key's (key, start, end) in it."""
    codes, uniques = pd.factorize(keys)
    order = np.argsort(codes, kind="stable")
    if not len(order):
        return order, []
    ends = [*(np.flatnonzero(np.diff(codes[order])) + 1).tolist(), len(order)]
    return order, list(zip(uniques, [0, *ends[:-1]], ends, strict=True))


def _nested(keys: pd.Series, names: pd.Series, values: np.ndarray) -> dict[str, dict]:
    """key -> {name: value}, as assigning row by row would build it (a later row wins)."""
    order, groups = _groups(keys)
    names_, values_ = names.to_numpy(object)[order].tolist(), values[order].tolist()
    return {key: dict(zip(names_[a:b], values_[a:b], strict=True)) for key, a, b in groups}


def _latency(lat: pd.DataFrame) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """(group -> stat -> ms, group -> how many queries were timed) of one run's rows."""
    group = lat["attribute"].where(lat["attribute"] == "all", lat["attribute"] + "=" + lat["group"])
    stats, counts = lat["stat"].isin(LATENCY_STATS), lat["stat"] == "count"
    values = lat["value"].to_numpy(float)
    timed = dict(zip(group[counts], values[counts.to_numpy()].astype(int).tolist(), strict=True))
    return _nested(group[stats], lat["stat"][stats], values[stats.to_numpy()]), timed


def _pairs(lat: pd.DataFrame) -> dict[str, dict[str, float]]:
    """group -> the interleaved pairs' stats (`aggregate.PAIRED_STATS`) of one run's rows."""
    group = lat["attribute"].where(lat["attribute"] == "all", lat["attribute"] + "=" + lat["group"])
    return _nested(group, lat["stat"], lat["value"].to_numpy(float))


def _top(rankings: pd.DataFrame) -> dict[str, list[dict]]:
    order, groups = _groups(rankings["query_id"])
    ids = rankings["doc_id"].to_numpy(object)[order].tolist()
    grades = rankings["grade"].astype("Int64").astype(object)
    grades = grades.where(grades.notna(), None).to_numpy(object)[order].tolist()
    return {
        key: [dict(id=i, grade=g) for i, g in zip(ids[a:b], grades[a:b], strict=True)]
        for key, a, b in groups
    }


def rerun(results: RunResults, reason: str | None = None) -> Rerun:
    """The baseline's configuration measured on a run's queries (`measure_run`'s results), at
    the baselines' precision, as the gate reads it back from the `runs` row; `reason`: why it
    was re-run (`gate.changes.rerun_reason`)."""
    pq, means = results.per_query, results.means
    return Rerun(
        reason=reason,
        measures=dict(zip(means["measure"], round_metrics(means["value"]), strict=True)),
        per_query=_rounded(pq),
        intervals=_intervals(means),
    )


def _rounded(pq: pd.DataFrame) -> dict[str, dict]:
    """query -> measure -> value at the baselines' precision."""
    return _nested(pq["query_id"], pq["measure"], np.array(round_metrics(pq["value"])))


def run_summary(
    per_query: pd.DataFrame,
    means: pd.DataFrame,
    *,
    sample_per_query: pd.DataFrame | None = None,
    llm_per_query: pd.DataFrame | None = None,
    **fields,
) -> RunSummary:
    """A RunSummary of one evaluated run's per-query and mean tables (query_id/measure/value;
    measure/value/ci_low/ci_high) and, for PPI, its per-query values on the population's drawn
    queries with human qrels and on all of them with LLM qrels; `fields` are the rest
    (dataset, system, run_id, ...). At the baselines' precision (they are stored
    rounded), so that rounding never shows as a per-query change or a "regression" of
    -0.0000001: the gate reads a stored run and `rageval gate` a run file alike."""
    return RunSummary(
        measures=dict(zip(means["measure"], round_metrics(means["value"]), strict=True)),
        per_query=_rounded(per_query),
        intervals=_intervals(means),
        sample_per_query={} if sample_per_query is None else _rounded(sample_per_query),
        llm_per_query={} if llm_per_query is None else _rounded(llm_per_query),
        **fields,
    )


def _text(run: tuple, column: str) -> str | None:
    """A text column of a `runs` row; None where it is NULL (runs stored before it existed)."""
    value = getattr(run, column, None)
    return value if isinstance(value, str) else None


def summaries(warehouse: BaseWarehouse, runs: pd.DataFrame) -> list[RunSummary]:
    """One RunSummary per row of `runs` (as returned by `select_runs`)."""
    if runs.empty:
        return []
    ids = runs["run_id"].tolist()
    where = f"WHERE run_id IN ({', '.join('?' * len(ids))})"
    with warehouse.read() as con:  # one connection for the five reads
        means, per_query, latency, rankings, labelled = (
            con.execute(f"SELECT * FROM {table} {where} {tail}", ids).df()
            for table, tail in (
                ("run_metrics", ""),
                ("query_metrics", ""),
                ("latency", ""),
                ("rankings", "ORDER BY query_id, rank"),
                ("label_query_metrics", ""),
            )
        )
    out = []
    for run in runs.itertuples(index=False):
        pq = per_query[per_query["run_id"] == run.run_id]
        run_means = means[means["run_id"] == run.run_id]
        run_latency = latency[latency["run_id"] == run.run_id]
        by_label = labelled[labelled["run_id"] == run.run_id]
        beside = run_latency["timed"].eq("baseline")
        paired = run_latency["timed"].eq(PAIRED)
        latency_stats, timed = _latency(run_latency[~beside & ~paired])
        baseline_latency, _ = _latency(run_latency[beside])
        out.append(
            run_summary(
                pq,
                run_means,
                sample_per_query=by_label[by_label["label_source"] == HUMAN],
                llm_per_query=by_label[by_label["label_source"] == LLM],
                dataset=run.dataset,
                split=run.split,
                system=run.system,
                fingerprint=run.fingerprint,
                run_id=run.run_id,
                created_at=pd.Timestamp(run.created_at).isoformat(),
                latency=latency_stats,
                latency_queries=timed,
                baseline_latency=baseline_latency,
                latency_pairs=_pairs(run_latency[paired]),
                suite=_text(run, "suite"),
                machine=_text(run, "machine"),
                level=_text(run, "level"),
                baseline_rerun=None
                if (rerun := _text(run, "baseline_rerun")) is None
                else Rerun.model_validate_json(rerun),
                n_queries=int(run.n_queries),
                k=int(run.k) if pd.notna(run.k) else None,
                config=json.loads(run.config) if isinstance(run.config, str) else None,
                top=_top(rankings[rankings["run_id"] == run.run_id]),
                human_sample=None
                if (sample := _text(run, "human_sample")) is None
                else HumanSample.model_validate_json(sample),
                query_digests={}
                if (digests := _text(run, "query_digests")) is None
                else json.loads(digests),
            )
        )
    return out


def history(warehouse: BaseWarehouse, dataset: str) -> pd.DataFrame:
    """Every stored evaluation's means (the `history` view) on one dataset."""
    return warehouse.query("SELECT * FROM history WHERE dataset = ?", [dataset])


def measure_history(
    warehouse: BaseWarehouse, dataset: str, measure: str, system: str | None, limit: int
) -> pd.DataFrame:
    """The `limit` latest evaluations' means of `measure` on `dataset` (of one `system`, or of
    all), oldest first: created_at, dataset, system, fingerprint, level, value."""
    return warehouse.query(
        """
        SELECT * FROM (
            SELECT created_at, dataset, system, fingerprint, level, value FROM history
            WHERE dataset = ? AND measure = ? AND (? IS NULL OR system = ?)
            ORDER BY created_at DESC LIMIT ?
        ) ORDER BY created_at
        """,
        [dataset, measure, system, system, limit],
    )
