"""Aggregating per-query values: means, breakdowns by query attribute, latency, seed-000 report.

All inputs are the long per-query table of `core.measures.evaluate` (query_id, measure, value)
and the QUERIES table; every output is a plain long table or a pydantic model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from rageval_pipeline.core.statistics.paired import bootstrap_ci

ATTRIBUTES = ("category", "difficulty", "intent", "query_type")
# The latency statistics stored per group (besides `count`) and compared by the gate. `pNN` is
# numpy's default linear interpolation between the two nearest ranks (method "linear", Hyndman
# & Fan type 7, as Excel PERCENTILE.INC and pandas quantile).
LatencyStat = Literal["mean", "p50", "p95", "p99"]
LATENCY_STATS: tuple[LatencyStat, ...] = get_args(LatencyStat)
# The measures the QualityReport needs in the per-query table.
REPORT_MEASURES = ("P@5", "P@10", "R@10", "RR")


def _interval(values: pd.Series) -> tuple[float, float]:
    return bootstrap_ci(values.to_numpy(float))


def mean_table(per_query: pd.DataFrame, *, intervals: bool = True) -> pd.DataFrame:
    """Mean of each measure over its queries with its 95% bootstrap interval (core.statistics):
    columns measure, value, ci_low, ci_high (measures in input order; NaN below 2 queries).
    `intervals=False` leaves the intervals NaN, saving 10,000 resamples per measure."""
    grouped = per_query.groupby("measure", sort=False)["value"]
    means = grouped.mean()
    low, high = ([np.nan] * len(means),) * 2
    if intervals and len(means):
        low, high = zip(*grouped.apply(_interval), strict=True)
    return pd.DataFrame(
        {
            "measure": means.index.astype(str),
            "value": means.to_numpy(float),
            "ci_low": np.array(low, dtype=float),
            "ci_high": np.array(high, dtype=float),
        }
    )


def _with_attributes(
    table: pd.DataFrame, queries: pd.DataFrame, attributes: Sequence[str]
) -> list[tuple[str, pd.DataFrame]]:
    """(attribute, table joined with that attribute) for each attribute the queries table has;
    queries whose attribute is null are left out of that attribute's groups."""
    out = []
    for attribute in attributes:
        if attribute not in queries.columns:
            continue
        labels = queries[["query_id", attribute]].dropna().astype(str)
        joined = table.merge(labels.rename(columns={attribute: "group"}), on="query_id")
        out.append((attribute, joined))
    return out


def breakdown(
    per_query: pd.DataFrame, queries: pd.DataFrame, attributes: Sequence[str] = ATTRIBUTES
) -> pd.DataFrame:
    """Means per group of each query attribute: attribute, group, measure, value, n_queries."""
    frames = []
    for attribute, joined in _with_attributes(per_query, queries, attributes):
        grouped = joined.groupby(["group", "measure"], sort=True)["value"]
        stats = grouped.agg(["mean", "size"])
        low, high = zip(*grouped.apply(_interval), strict=True) if len(stats) else ((), ())
        frames.append(
            pd.DataFrame(
                {
                    "attribute": attribute,
                    "group": stats.index.get_level_values("group").astype(str),
                    "measure": stats.index.get_level_values("measure").astype(str),
                    "value": stats["mean"].to_numpy(float),
                    "n_queries": stats["size"].to_numpy(np.int64),
                    "ci_low": np.array(low, dtype=float),
                    "ci_high": np.array(high, dtype=float),
                }
            )
        )
    columns = ["attribute", "group", "measure", "value", "n_queries", "ci_low", "ci_high"]
    if not frames:
        floats = {"value", "ci_low", "ci_high"}
        return pd.DataFrame({c: pd.Series(dtype=float if c in floats else str) for c in columns})
    return pd.concat(frames, ignore_index=True)[columns]


def query_latency(run: pd.DataFrame, column: str = "latency_ms") -> pd.DataFrame:
    """One latency per query (every row of a query carries the same one): query_id, latency_ms.

    Queries without a latency (e.g. read from a TREC file) are left out. `column` may name the
    baseline configuration's timing instead (`baseline_latency_ms`).
    """
    if column not in run.columns:
        return pd.DataFrame(
            {"query_id": pd.Series(dtype=str), "latency_ms": pd.Series(dtype=float)}
        )
    latency = run.groupby("query_id", sort=True)[column].first().dropna()
    return pd.DataFrame(
        {"query_id": latency.index.astype(str), "latency_ms": latency.to_numpy(float)}
    )


def _latency_stat(values: np.ndarray, stat: LatencyStat) -> float:
    return float(np.mean(values) if stat == "mean" else np.percentile(values, float(stat[1:])))


def _latency_rows(values: np.ndarray) -> list[tuple[str, float]]:
    return [("count", float(len(values)))] + [(s, _latency_stat(values, s)) for s in LATENCY_STATS]


# `timed` of a latency row: the system itself, or the baseline's configuration timed beside it.
TIMED = {"system": "latency_ms", "baseline": "baseline_latency_ms"}


def latency_stats(
    run: pd.DataFrame, queries: pd.DataFrame | None = None, attributes: Sequence[str] = ATTRIBUTES
) -> pd.DataFrame:
    """Latency count, mean, p50, p95, p99 (ms): timed, attribute, group, stat, value.

    The overall row set has attribute "all" and group "all"; then one set per group of each
    query attribute; each for the system and, when it was timed beside it, for the baseline's
    configuration. Empty when the run carries no latency.
    """
    records: list[tuple[str, str, str, str, float]] = []
    for timed, column in TIMED.items():
        latency = query_latency(run, column)
        if not len(latency):
            continue
        records += [(timed, "all", "all", s, v) for s, v in _latency_rows(latency["latency_ms"])]
        groups = _with_attributes(latency, queries, attributes) if queries is not None else []
        for attribute, joined in groups:
            for group, part in joined.groupby("group", sort=True):
                rows = _latency_rows(part["latency_ms"].to_numpy())
                records += [(timed, attribute, str(group), s, v) for s, v in rows]
    records += _paired_records(run, queries, attributes)
    columns = ["timed", "attribute", "group", "stat", "value"]
    frame = pd.DataFrame.from_records(records, columns=columns)
    return frame.astype({c: str for c in columns[:-1]} | {"value": float})


# `timed` of the rows describing the interleaved pairs (system / baseline configuration, per
# query), and their stats: how many pairs, the median ratio and its 95% lower bound.
PAIRED = "paired"
PAIRED_STATS = ("pairs", "ratio_p50", "ratio_low")


def _paired_records(
    run: pd.DataFrame, queries: pd.DataFrame | None, attributes: Sequence[str]
) -> list[tuple[str, str, str, str, float]]:
    """The PAIRED rows of each group timed both ways: the per-query ratio's median and its
    one-sided 95% lower bound (`statistics.median_bound`), as ratios, with the number of pairs."""
    from rageval_pipeline.core.statistics.median_bound import median_lower_bound

    system, beside = (query_latency(run, column) for column in TIMED.values())
    pairs = system.merge(beside, on="query_id", suffixes=("", "_beside"))
    pairs = pairs[(pairs["latency_ms"] > 0) & (pairs["latency_ms_beside"] > 0)]
    pairs = pairs.assign(latency_ms=np.log(pairs["latency_ms"] / pairs["latency_ms_beside"]))
    sets = [("all", pairs.assign(group="all"))]
    if queries is not None:
        sets += _with_attributes(pairs, queries, attributes)
    records = []
    for attribute, joined in sets:
        for group, part in joined.groupby("group", sort=True):
            logs = part["latency_ms"].to_numpy(float)
            low = median_lower_bound(logs)
            values = (len(logs), np.exp(np.median(logs)), 0.0 if low is None else np.exp(low))
            records += [
                (PAIRED, attribute, str(group), stat, float(value))
                for stat, value in zip(PAIRED_STATS, values, strict=True)
            ]
    return records


class CategoryMetrics(BaseModel):
    """The quality report's per-category (or per-difficulty) figures."""

    model_config = ConfigDict(frozen=True)

    query_count: int = Field(ge=0)
    precision_at_5: float
    recall_at_10: float
    mrr: float


class QualityReport(BaseModel):
    """The quality report: means over the evaluated queries."""

    model_config = ConfigDict(frozen=True)

    total_queries: int = Field(ge=0)
    precision_at_5: float
    precision_at_10: float
    recall_at_10: float
    mrr: float
    queries_with_no_relevant: int = Field(
        ge=0, description="evaluated queries with no relevant document retrieved (RR = 0)"
    )
    by_category: dict[str, CategoryMetrics]
    by_difficulty: dict[str, CategoryMetrics]

    def to_markdown(self, title: str) -> str:
        """The quality report as Markdown: totals, then one table per breakdown."""
        lines = [
            f"### {title}",
            "",
            f"{self.total_queries} queries: P@5 {self.precision_at_5:.3f}, "
            f"P@10 {self.precision_at_10:.3f}, R@10 {self.recall_at_10:.3f}, "
            f"MRR {self.mrr:.3f}; {self.queries_with_no_relevant} with no relevant result.",
        ]
        for name, groups in (("category", self.by_category), ("difficulty", self.by_difficulty)):
            lines += [
                "",
                f"| {name} | queries | P@5 | R@10 | MRR |",
                "| --- | --- | --- | --- | --- |",
            ]
            lines += [
                f"| {group} | {m.query_count} | {m.precision_at_5:.3f} | {m.recall_at_10:.3f} "
                f"| {m.mrr:.3f} |"
                for group, m in groups.items()
            ]
        return "\n".join(lines) + "\n"


def _category_metrics(wide: pd.DataFrame) -> CategoryMetrics:
    return CategoryMetrics(
        query_count=len(wide),
        precision_at_5=float(wide["P@5"].mean()),
        recall_at_10=float(wide["R@10"].mean()),
        mrr=float(wide["RR"].mean()),
    )


def quality_report(per_query: pd.DataFrame, queries: pd.DataFrame) -> QualityReport:
    """The quality report from a per-query table holding REPORT_MEASURES (ValueError if not)."""
    missing = [m for m in REPORT_MEASURES if m not in set(per_query["measure"])]
    if missing:
        raise ValueError(f"per-query table lacks {missing}; evaluate {list(REPORT_MEASURES)}")
    wide = per_query[per_query["measure"].isin(REPORT_MEASURES)].pivot(
        index="query_id", columns="measure", values="value"
    )
    labels = queries.set_index(queries["query_id"].astype(str))
    by: dict[str, dict[str, CategoryMetrics]] = {}
    for attribute in ("category", "difficulty"):
        column = labels[attribute].reindex(wide.index) if attribute in labels else None
        groups = wide.groupby(column, sort=True) if column is not None else []
        by[attribute] = {str(group): _category_metrics(part) for group, part in groups}
    return QualityReport(
        total_queries=len(wide),
        precision_at_5=float(wide["P@5"].mean()) if len(wide) else 0.0,
        precision_at_10=float(wide["P@10"].mean()) if len(wide) else 0.0,
        recall_at_10=float(wide["R@10"].mean()) if len(wide) else 0.0,
        mrr=float(wide["RR"].mean()) if len(wide) else 0.0,
        queries_with_no_relevant=int((wide["RR"] == 0).sum()),
        by_category=by["category"],
        by_difficulty=by["difficulty"],
    )
