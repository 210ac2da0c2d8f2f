"""Everything one evaluated run produces (per-query, mean, breakdown and latency tables), and
where it is stored (`store_results`).

The level rule: chunk-level judgments are used only when the system chunks documents exactly as
the suite's reference chunking does (otherwise its chunk ids mean something else). A system
with another chunking, on a suite with evidence spans, is judged at chunk level too, by qrels
derived from the spans (`core.suites.derived`). In every other case a run is evaluated at document
level, each document ranked by its best chunk and judged by its best-graded chunk.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from pydantic import BaseModel, ConfigDict

from rageval_pipeline.core.io.chunk_ids import source_ids
from rageval_pipeline.core.io.ranking import order_run
from rageval_pipeline.core.measures import evaluate, parse_measure, to_document_level
from rageval_pipeline.core.measures.aggregate import (
    breakdown,
    latency_stats,
    mean_table,
    quality_report,
)
from rageval_pipeline.core.measures.defaults import DEFAULT_MEASURES
from rageval_pipeline.core.measures.spans import evaluate_spans
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.files import write_parquet, write_text
from rageval_pipeline.core.suites.conventions import drop_identical_ids
from rageval_pipeline.core.suites.derived import EvidenceSet

# Bump when what `measure_run`/`store_results` produce changes: part of metrics' code version.
# 2: coverage counted at the judged level; suite, machine, timed latency. 3: span measures, and
# qrels derived from evidence spans for other chunkings. 4: evidence measures at token budgets.
METRICS_VERSION = "4"


class RunResults(NamedTuple):
    level: str  # "chunk" or "document"
    per_query: pd.DataFrame  # query_id, measure, value
    means: pd.DataFrame  # measure, value
    groups: pd.DataFrame  # attribute, group, measure, value, n_queries
    latency: pd.DataFrame  # attribute, group, stat, value
    identical_ids_dropped: int = 0  # retrieved documents that were the query itself
    top: pd.DataFrame | None = None  # query_id, rank, doc_id, grade: the top LISTED, judged level
    # PPI with LLM qrels: ppi_metrics and label_query_metrics rows (ppi_storage.ppi_tables).
    ppi: dict[str, pd.DataFrame] | None = None


LISTED = 10  # how deep each query's list is kept for baselines and reports


def top_listed(ranked: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
    """Each query's first LISTED ids of a ranked run, with their grades (null: unjudged)."""
    hits = ranked[ranked["doc_id"].notna() & (ranked["rank"] <= LISTED)]
    grades = judged[["query_id", "doc_id", "relevance"]].rename(columns={"relevance": "grade"})
    top = hits[["query_id", "rank", "doc_id"]].merge(grades, on=["query_id", "doc_id"], how="left")
    return top.astype({"rank": "int32", "grade": "Int32"}).sort_values(["query_id", "rank"])


def document_qrels(qrels: pd.DataFrame) -> pd.DataFrame:
    """Chunk-level judgments lifted to their documents, each with its best chunk's grade."""
    if qrels.empty or (qrels["level"] == "document").all():
        return qrels
    lifted = qrels.assign(
        doc_id=source_ids(qrels["doc_id"]).where(qrels["level"] == "chunk", qrels["doc_id"]),
        level="document",
    )
    keys = ["split", "query_id", "doc_id", "level"]
    return lifted.groupby(keys, as_index=False, sort=False)["relevance"].max()[qrels.columns]


def measure_run(
    run: pd.DataFrame,
    qrels: pd.DataFrame,
    queries: pd.DataFrame,
    *,
    chunk_level: bool,
    measures: tuple[str, ...] = DEFAULT_MEASURES,
    ignore_identical_ids: bool = False,
    evidence: EvidenceSet | None = None,
) -> RunResults:
    """Evaluate a RUN against one split's QRELS; `chunk_level` per the module's level rule.

    `ignore_identical_ids` (the dataset's convention, `core.io.beir`) first drops retrieved
    documents whose id is the query's id (`core.suites.conventions`). `evidence`: the suite's spans
    and the run's units, when it has spans; the span measures are computed only then."""
    dropped = 0
    if ignore_identical_ids:
        run, dropped = drop_identical_ids(run)
    documents = document_qrels(qrels)
    if evidence is not None:
        evidence = evidence.with_passages(run)  # an outside chunker's (core.suites.passages)
    if chunk_level and (qrels["level"] == "chunk").any():
        level, judged, ranked = "chunk", qrels, run
    elif evidence is not None and evidence.chunked:
        level, judged, ranked = "chunk", evidence.qrels(), run
    else:
        level, judged, ranked = "document", documents, to_document_level(run)
    parsed = [parse_measure(m) for m in measures]
    # Measures over source documents (ER, Diversity, Clustering) read the run as retrieved:
    # on a document-level run every document appears once and Diversity would always be 1.
    by_source = [m for m in parsed if m.USES_SOURCE]
    by_span = [m for m in parsed if m.USES_SPANS]
    ranked_measures = [m for m in parsed if not (m.USES_SOURCE or m.USES_SPANS)]
    parts = [evaluate(judged, ranked, ranked_measures), evaluate(documents, run, by_source)]
    if evidence is not None and by_span:
        spans, units, tokens = evidence.spans, evidence.units, evidence.tokens
        parts.append(evaluate_spans(ranked, spans, units, tokens, by_span))
    per_query = pd.concat(parts, ignore_index=True)
    return RunResults(
        level=level,
        per_query=per_query,
        means=mean_table(per_query),
        groups=breakdown(per_query, queries),
        latency=latency_stats(run, queries),
        identical_ids_dropped=dropped,
        top=top_listed(order_run(ranked), judged),
    )


def suite_digest(qrels: pd.DataFrame, queries: pd.DataFrame, target_ids: pd.Series) -> str:
    """A digest of what a run is measured on: the split's judgments, its judged queries' text
    and the corpus's ids. A baseline of another suite is not comparable (core.gate.changes).
    The corpus's text is left out on purpose: a pipeline that damages it (cut documents, lost
    sections) has regressed, and the gate must check that against the baseline."""
    judged = qrels[["query_id", "doc_id", "relevance"]].astype(str).agg("\t".join, axis=1)
    asked = queries[queries["query_id"].isin(qrels["query_id"])]
    texts = asked["query_id"].astype(str) + "\t" + asked["text"].fillna("").astype(str)
    digest = hashlib.sha256()
    for part in (judged, texts, target_ids.astype(str)):
        digest.update("\n".join(sorted(part.tolist())).encode("utf-8") + b"\x00")
    return digest.hexdigest()[:16]


def query_digests(
    qrels: pd.DataFrame, queries: pd.DataFrame, spans: pd.DataFrame | None = None
) -> dict[str, str]:
    """Per judged query, a digest of what decides its value: its text, its judgments (the
    corpus ids they name with their grades) and its evidence spans. A baseline of another
    suite version is compared on the queries whose digests are unchanged (core/gate/
    unchanged.py); an added or re-judged query is scored, not compared."""
    judged = qrels.assign(row=qrels[["doc_id", "relevance"]].astype(str).agg("\t".join, axis=1))
    rows = judged.groupby(judged["query_id"].astype(str))["row"].apply(sorted).to_dict()
    asked = queries.assign(query_id=queries["query_id"].astype(str)).drop_duplicates("query_id")
    texts = dict(zip(asked["query_id"], asked["text"].fillna("").astype(str), strict=True))
    evidence: dict[str, list[str]] = {}
    if spans is not None and not spans.empty:
        columns = sorted(c for c in spans.columns if c != "query_id")
        marked = spans.assign(row=spans[columns].astype(str).agg("\t".join, axis=1))
        evidence = marked.groupby(marked["query_id"].astype(str))["row"].apply(sorted).to_dict()
    out = {}
    for query, judgments in sorted(rows.items()):
        parts = [texts.get(query, ""), *judgments, "\x00", *evidence.get(query, [])]
        out[query] = hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]
    return out


class RunRecord(BaseModel):
    """Where a run came from: with its results, the row of the `runs` table."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    split: str
    system: str
    fingerprint: str
    k: int
    config: dict  # the system's configuration as run (see SystemConfig.recorded_config)
    created_at: datetime
    dagster_run_id: str | None = None
    suite: str | None = None  # digest of what it was measured on (core.gate.changes)
    machine: str | None = None  # digest of the hardware it was timed on (core.retrieval.machine)
    # The baseline's configuration re-run on this suite (gate.Rerun as JSON), when it changed.
    baseline_rerun: str | None = None
    # The recorded random draw of the human-judged queries (sampling.HumanSample as JSON),
    # when the run is also scored with LLM qrels for PPI.
    human_sample: str | None = None
    # Per judged query, the digest of what decides its value (`query_digests`, JSON).
    query_digests: str | None = None

    @property
    def run_id(self) -> str:
        return f"{self.created_at:%Y%m%dT%H%M%S%fZ}-{self.dataset}-{self.system}"


class StoredRun(NamedTuple):
    run_id: str
    quality_markdown: str  # the quality report, for the Dagster UI
    means: dict[str, float]  # measure -> mean


def store_results(
    storage: Path,
    warehouse: BaseWarehouse,
    record: RunRecord,
    results: RunResults,
    queries: pd.DataFrame,
    *,
    notes: str = "",
) -> StoredRun:
    """Record one evaluated run: its rows in the warehouse (one transaction), the same tables
    mirrored as Parquet under `storage/tables/`, and the quality report (JSON, and
    Markdown followed by `notes`) under `storage/reports/quality/`. The run counts as finished
    (`runs.finished`) only once all of them are written; in the mirror, once its row in
    `tables/runs/` is, written after that (`mirrored` reads only such runs' rows)."""
    run_id, dataset, system = record.run_id, record.dataset, record.system
    keys = dict(run_id=run_id, dataset=dataset, split=record.split, system=system)
    human = dict(label_source="human")  # (PPI's other label sources: ppi_storage)
    tables = {
        "run_metrics": results.means.assign(**keys, created_at=record.created_at, **human),
        "query_metrics": results.per_query.assign(**keys, **human),
        "group_metrics": results.groups.assign(**keys),
        "latency": results.latency.assign(**keys),
    }
    if results.top is not None:
        tables["rankings"] = results.top.assign(**keys)
    tables |= {table: df.assign(**keys) for table, df in (results.ppi or {}).items()}
    row = record.model_dump(exclude={"config"}) | dict(
        run_id=run_id,
        level=results.level,
        n_queries=int(results.per_query["query_id"].nunique()),
        config=json.dumps(record.config, sort_keys=True),
    )
    warehouse.record_run(row, tables)
    for table, df in tables.items():
        write_parquet(df, _mirror(storage, table, record))
    quality = quality_report(results.per_query, queries)
    markdown = quality.to_markdown(f"{dataset} / {system} ({results.level} level)") + notes
    folder = storage / "reports" / "quality" / dataset / system
    write_text(folder / f"{run_id}.json", quality.model_dump_json(indent=2) + "\n")
    write_text(folder / f"{run_id}.md", markdown)
    warehouse.finish(runs=run_id)  # a run killed before here is never judged or reused
    write_parquet(pd.DataFrame([row | {"finished": True}]), _mirror(storage, "runs", record))
    means = dict(zip(results.means["measure"], results.means["value"].astype(float), strict=True))
    return StoredRun(run_id, markdown, means)


def _mirror(storage: Path, table: str, record: RunRecord) -> Path:
    """Where a run's rows of `table` are mirrored under `storage/tables/`."""
    folder = storage / "tables" / table / f"dataset={record.dataset}" / f"system={record.system}"
    return folder / f"{record.run_id}.parquet"


def mirrored(storage: Path, table: str) -> pd.DataFrame:
    """A table of the Parquet mirror under `storage/tables/` as a rebuild reads it: the rows of
    finished evaluations only, those with a row in `tables/runs/` (written last), so a step
    killed after writing some of its tables leaves nothing counted (docs/deploy.md)."""
    import duckdb

    base = storage / "tables"
    if not any((base / "runs").rglob("*.parquet")) or not any((base / table).rglob("*.parquet")):
        return pd.DataFrame()
    sql = (
        "SELECT t.* FROM read_parquet(?, union_by_name = true) t "
        "SEMI JOIN read_parquet(?, union_by_name = true) r USING (run_id)"
    )
    files = [str(base / name / "**" / "*.parquet") for name in (table, "runs")]
    with duckdb.connect() as con:
        return con.execute(sql, files).df()
