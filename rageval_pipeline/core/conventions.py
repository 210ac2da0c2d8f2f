"""Dataset conventions that decide whether our numbers are comparable with published ones.

- Identical ids (BEIR `ignore_identical_ids`): in datasets whose queries are also corpus
  documents (ArguAna, Quora; `core.beir.BEIR_DATASETS`), a query trivially retrieves itself.
  BEIR's `EvaluateRetrieval.evaluate` pops every retrieved document whose id equals the query
  id before running pytrec_eval; `drop_identical_ids` does the same, for those datasets only.
- Qrels coverage: judgments naming a document absent from the corpus, or a query absent from the
  queries file, are counted (`qrels_coverage`) and kept, as trec_eval keeps them: such a
  document can never be retrieved, so it caps recall, and dropping it would inflate the scores.
"""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel, ConfigDict


def drop_identical_ids(run: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The run without rows retrieving the query itself (document id == query id), and how
    many rows were dropped. A chunk's document is its `source_id` when the run has one."""
    document = run["source_id"].fillna(run["doc_id"]) if "source_id" in run else run["doc_id"]
    same = (document.astype(str) == run["query_id"].astype(str)).to_numpy()
    return run[~same].reset_index(drop=True), int(same.sum())


class QrelsCoverage(BaseModel):
    """What the judgments name that the corpus or the queries file lacks (kept, not dropped)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judgments: int
    missing_documents: int  # judgments whose document is not in the corpus
    missing_queries: int  # judged queries absent from the queries file
    examples: list[str]  # a few "query_id/doc_id" or "query_id" examples, for the reader


def qrels_coverage(
    qrels: pd.DataFrame, corpus_ids: pd.Series, query_ids: pd.Series, *, examples: int = 5
) -> QrelsCoverage:
    """Count the judgments naming unknown documents and the judged queries not in the queries."""
    known_docs = set(corpus_ids.astype(str))
    no_doc = qrels[~qrels["doc_id"].astype(str).isin(known_docs)]
    judged = pd.Series(qrels["query_id"].astype(str).unique())
    no_query = judged[~judged.isin(set(query_ids.astype(str)))]
    shown = [f"{q}/{d}" for q, d in zip(no_doc["query_id"], no_doc["doc_id"], strict=True)]
    return QrelsCoverage(
        judgments=len(qrels),
        missing_documents=len(no_doc),
        missing_queries=len(no_query),
        examples=(shown + list(no_query))[:examples],
    )
