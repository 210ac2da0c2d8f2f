"""Dataset conventions that decide whether our numbers are comparable with published ones.

- Identical ids (BEIR `ignore_identical_ids`): in datasets whose queries are also corpus
  documents (ArguAna, Quora; `core.io.beir.BEIR_DATASETS`), a query trivially retrieves itself.
  BEIR's `EvaluateRetrieval.evaluate` pops every retrieved document whose id equals the query
  id before running pytrec_eval; `drop_identical_ids` does the same, for those datasets only.
- Qrels coverage: judgments naming a target absent from the corpus, or a query absent from the
  queries file, are counted (`qrels_coverage`) and kept, as trec_eval keeps them: such a
  target can never be retrieved, so it caps recall, and dropping it would inflate the scores.
  A target is looked for at the level the run was judged at (`core.results.store`): a chunk-level
  judgment among the chunks of the suite's reference chunking, a document-level one (or, at
  document level, a chunk's source document) among the documents.
"""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel, ConfigDict

from rageval_pipeline.core.io.chunk_ids import source_ids
from rageval_pipeline.core.suites.chunking import ChunkingConfig, StoredChunks, chunks_of
from rageval_pipeline.core.suites.matching import Level


def drop_identical_ids(run: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The run without rows retrieving the query itself (document id == query id), and how
    many rows were dropped. A chunk's document is its `source_id` when the run has one."""
    document = run["source_id"].fillna(run["doc_id"]) if "source_id" in run else run["doc_id"]
    same = (document.astype(str) == run["query_id"].astype(str)).to_numpy()
    return run[~same].reset_index(drop=True), int(same.sum())


class QrelsCoverage(BaseModel):
    """What the judgments name that the corpus or the queries file lacks (kept, not dropped)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: Level  # the level the run was judged at: it decides what a target is
    judgments: int
    missing_targets: int  # judgments whose chunk or document is not in the corpus
    missing_queries: int  # judged queries absent from the queries file
    examples: list[str]  # a few "query_id/target" or "query_id" examples, for the reader


def qrels_coverage(
    qrels: pd.DataFrame,
    corpus: pd.DataFrame,
    query_ids: pd.Series,
    *,
    level: Level,
    reference: ChunkingConfig | None,
    examples: int = 5,
    stored_chunks: StoredChunks | None = None,
) -> QrelsCoverage:
    """Count the judgments naming a target the corpus lacks, at the run's judged `level`
    (`RunResults.level`), and the judged queries not in the queries. `reference`: the suite's
    reference chunking, under which its chunk-level judgments are numbered. `stored_chunks`: the
    corpus chunked by a chunking, as the caller has it stored (`chunks_of`)."""
    targets = qrels["doc_id"].astype(str)
    chunk = qrels["level"] == "chunk"
    documents = set(corpus["doc_id"].astype(str))
    if level == "document":  # as `results.document_qrels` lifts them: a chunk judges its document
        found = source_ids(targets).where(chunk, targets).isin(documents)
    else:
        ids = _reference_chunk_ids(corpus, reference, stored_chunks) if chunk.any() else set()
        found = targets.isin(ids).where(chunk, targets.isin(documents))
    absent = qrels[~found]
    judged = pd.Series(qrels["query_id"].astype(str).unique())
    no_query = judged[~judged.isin(set(query_ids.astype(str)))]
    shown = [f"{q}/{d}" for q, d in zip(absent["query_id"], absent["doc_id"], strict=True)]
    return QrelsCoverage(
        level=level,
        judgments=len(qrels),
        missing_targets=len(absent),
        missing_queries=len(no_query),
        examples=(shown + list(no_query))[:examples],
    )


def _reference_chunk_ids(
    corpus: pd.DataFrame,
    reference: ChunkingConfig | None,
    stored_chunks: StoredChunks | None,
) -> set[str]:
    """The chunk ids of the corpus under the dataset's reference chunking (`reference`
    resolved: whole documents for a dataset without one), as the suite numbers them."""
    chunking = ChunkingConfig(strategy="reference").resolve(reference)
    return set(chunks_of(corpus, chunking, stored_chunks)["chunk_id"])


def conventions_note(coverage: QrelsCoverage, identical_ids_dropped: int) -> str:
    """The dataset conventions applied to a run, as a Markdown paragraph for its quality report."""
    target = (
        "a chunk absent from the corpus under its reference chunking"
        if coverage.level == "chunk"
        else "a document absent from the corpus (a chunk-level judgment by its document)"
    )
    text = (
        f"\n**Qrels coverage ({coverage.level} level):** {coverage.missing_targets} of "
        f"{coverage.judgments} judgments name {target} and {coverage.missing_queries} judged "
        "queries are absent from the queries file; they are kept, as trec_eval keeps them "
        "(they cap recall)."
    )
    if coverage.examples:
        text += f" Examples: {', '.join(coverage.examples)}."
    if identical_ids_dropped:
        text += (
            f" {identical_ids_dropped} retrieved documents were the query itself and were dropped."
        )
    return text + "\n"
