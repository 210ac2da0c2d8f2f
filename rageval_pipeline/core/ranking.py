"""The one ordering rule every stored rank follows: trec_eval's.

trec_eval sorts a query's results by score descending and breaks ties by document id
descending (byte order). Storing ranks in that order means every evaluator (ours, trec_eval,
pytrec_eval) sees the same ranking, whatever order a retriever emitted tied results in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def order_run(run: pd.DataFrame) -> pd.DataFrame:
    """Sort by query, score desc, doc id desc and (re)number `rank` from 1 within each query.

    Rows with a null doc_id (a query that returned nothing) keep a null rank.
    """
    if run.empty:
        out = run.copy()
        out["rank"] = pd.Series(dtype="Int32")
        return out
    hits = run[run["doc_id"].notna()]
    misses = run[run["doc_id"].isna()]
    hits = hits.sort_values(
        ["query_id", "score", "doc_id"], ascending=[True, False, False], kind="mergesort"
    ).reset_index(drop=True)
    hits["rank"] = (hits.groupby("query_id", sort=False).cumcount() + 1).astype("Int32")
    misses = misses.assign(rank=pd.array([pd.NA] * len(misses), dtype="Int32"))
    out = pd.concat([hits, misses], ignore_index=True) if len(misses) else hits
    return out.sort_values(["query_id", "rank"], kind="mergesort", na_position="last").reset_index(
        drop=True
    )


def top_k(scores: np.ndarray, ids: np.ndarray, k: int, *, positive_only: bool = False) -> list[int]:
    """Indices of the k best scores in trec_eval order (score desc, id desc).

    Everything tied with the k-th score is ordered by id before the cut, so which of several
    tied documents makes the top k never depends on an index's internal order.
    `positive_only` drops scores <= 0 (BM25: a document that matches no query term).
    """
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(scores.size)
    if candidates.size > k:
        kth = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
        candidates = candidates[scores[candidates] >= kth]
    # lexsort's last key is the primary one: score desc, then id desc.
    order = np.lexsort((ids[candidates], scores[candidates]))[::-1]
    return candidates[order][:k].tolist()
