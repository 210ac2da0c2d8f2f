"""Everything one evaluated run produces: per-query, mean, breakdown and latency tables.

The level rule: chunk-level judgments are used only when the system chunks documents exactly as
the suite's reference chunking does (otherwise its chunk ids mean something else); in every
other case a run is evaluated at document level, each document ranked by its best chunk and
judged by its best-graded chunk.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from rageval_pipeline.core.chunking import source_ids
from rageval_pipeline.core.conventions import drop_identical_ids
from rageval_pipeline.core.evaluate import breakdown, latency_stats, mean_table
from rageval_pipeline.core.measures import evaluate, parse_measure, to_document_level

DEFAULT_MEASURES = (
    "nDCG@10",
    "nDCG@5",
    "P@5",
    "P@10",
    "P(rel=2)@5",
    "R@5",
    "R@10",
    "R@100",
    "RR",
    "AP",
    "Success@10",
    "ER@5",
    "Diversity@10",
    "Clustering@10",
    # Judgment coverage, and condensed (judged-only) variants beside the standard measures: a
    # drop in the standard measure but not its condensed one points at missing judgments.
    "Judged@10",
    "nDCG(judged)@10",
    "P(judged)@10",
)


class RunResults(NamedTuple):
    level: str  # "chunk" or "document"
    per_query: pd.DataFrame  # query_id, measure, value
    means: pd.DataFrame  # measure, value
    groups: pd.DataFrame  # attribute, group, measure, value, n_queries
    latency: pd.DataFrame  # attribute, group, stat, value
    identical_ids_dropped: int = 0  # retrieved documents that were the query itself


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
) -> RunResults:
    """Evaluate a RUN against one split's QRELS; `chunk_level` per the module's level rule.

    `ignore_identical_ids` (the dataset's convention, `core.beir`) first drops retrieved
    documents whose id is the query's id (`core.conventions`)."""
    dropped = 0
    if ignore_identical_ids:
        run, dropped = drop_identical_ids(run)
    documents = document_qrels(qrels)
    if chunk_level and (qrels["level"] == "chunk").any():
        level, judged, ranked = "chunk", qrels, run
    else:
        level, judged, ranked = "document", documents, to_document_level(run)
    parsed = [parse_measure(m) for m in measures]
    # Measures over source documents (ER, Diversity, Clustering) read the run as retrieved:
    # on a document-level run every document appears once and Diversity would always be 1.
    by_source = [m for m in parsed if m.USES_SOURCE]
    ranked_measures = [m for m in parsed if not m.USES_SOURCE]
    per_query = pd.concat(
        [
            evaluate(judged, ranked, ranked_measures),
            evaluate(documents, run, by_source),
        ],
        ignore_index=True,
    )
    return RunResults(
        level=level,
        per_query=per_query,
        means=mean_table(per_query),
        groups=breakdown(per_query, queries),
        latency=latency_stats(run, queries),
        identical_ids_dropped=dropped,
    )
