"""Condensed (judged-only) runs: what `nDCG(judged)@10` and the other `(judged)` variants rank.

trec_eval's `-J` and Sakai's condensed lists (Sakai 2007, "Alternatives to bpref") remove every
retrieved document the qrels do not judge for that query (label 0 counts as judged) and close
the gaps before ranking measures are computed. A system that retrieves many unjudged documents
is then measured on what the assessors saw, so the variant beside the standard measure tells a
drop caused by missing judgments from a drop caused by worse retrieval.
"""

from __future__ import annotations

import pandas as pd


def judged_only(qrels: pd.DataFrame, run: pd.DataFrame) -> pd.DataFrame:
    """The run without the documents the qrels do not judge for its query (and without
    placeholder rows); scores are kept, so the remaining order is the run's own."""
    judged = qrels[["query_id", "doc_id"]].drop_duplicates().astype(str)
    keys = run[["query_id", "doc_id"]].astype(str)
    kept = pd.MultiIndex.from_frame(keys).isin(pd.MultiIndex.from_frame(judged))
    return run[kept & run["doc_id"].notna().to_numpy()].reset_index(drop=True)
