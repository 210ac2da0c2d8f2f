"""Fusing RUN tables: reciprocal rank fusion and weighted min-max score fusion.

Members are fused over the ids they return (`level="chunk"`, right when they share a chunking)
or, with `level="document"`, after each member is collapsed to its best chunk per source
document, so members with different chunkings can be fused. A fused run is as deep as its
deepest member, so it is compared with its members at the same depth.

Latency: the members run one after another, so a query's fused latency is the sum of its
members' latencies (fusion itself is negligible and not counted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import pandas as pd

from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.ranking import order_run, to_document_level

Level = Literal["chunk", "document"]
_COLUMNS = ("query_id", "doc_id", "source_id", "score")


def rrf(runs: Sequence[pd.DataFrame], *, k: int = 60, level: Level = "chunk") -> pd.DataFrame:
    """Reciprocal rank fusion: score(d) = sum over members of 1 / (k + rank of d)."""
    if k <= 0:
        raise ValueError(f"rrf k must be positive, got {k}")
    return _fuse(runs, level, lambda _, hits: 1.0 / (k + hits["rank"].astype(float)))


def weighted(
    runs: Sequence[pd.DataFrame], weights: Sequence[float], *, level: Level = "chunk"
) -> pd.DataFrame:
    """score(d) = sum over members of weight * min-max normalised score of d in that query.

    A query where a member's scores are all equal normalises them to 1: each is that member's
    best answer. A document a member did not return contributes 0 for that member.
    """
    if len(weights) != len(runs):
        raise ValueError(f"{len(weights)} weights for {len(runs)} runs")
    if any(w < 0 for w in weights) or not any(w > 0 for w in weights):
        raise ValueError(f"weights must be >= 0 with at least one > 0, got {list(weights)}")

    def contribution(member: int, hits: pd.DataFrame) -> pd.Series:
        by_query = hits.groupby("query_id", sort=False)["score"]
        low, high = by_query.transform("min"), by_query.transform("max")
        span = high - low
        norm = ((hits["score"] - low) / span.where(span > 0)).fillna(1.0)
        return weights[member] * norm

    return _fuse(runs, level, contribution)


def _fuse(
    runs: Sequence[pd.DataFrame],
    level: Level,
    contribution: Callable[[int, pd.DataFrame], pd.Series],
) -> pd.DataFrame:
    """Sum each member's `contribution(member index, its hits)` per (query, id)."""
    if len(runs) < 2:
        raise ValueError(f"fusion needs at least two runs, got {len(runs)}")
    if level not in ("chunk", "document"):
        raise ValueError(f"fusion level must be 'chunk' or 'document', got {level!r}")
    members = [
        to_document_level(r, keep_scores=True) if level == "document" else order_run(r)
        for r in runs
    ]
    # A member timed without its baseline configuration beside it leaves the fused one untimed.
    members = [
        m if "baseline_latency_ms" in m else m.assign(baseline_latency_ms=float("nan"))
        for m in members
    ]
    latency, reference = (
        pd.concat([m.groupby("query_id", sort=False)[column].first() for m in members])
        .groupby(level=0)
        .sum(min_count=len(members) if column == "baseline_latency_ms" else 0)
        for column in ("latency_ms", "baseline_latency_ms")
    )
    depth = max(int(m["rank"].max()) if m["rank"].notna().any() else 0 for m in members)
    parts = []
    for i, member in enumerate(members):
        hits = member[member["doc_id"].notna()]
        parts.append(hits.assign(score=contribution(i, hits))[list(_COLUMNS)])
    scored = pd.concat(parts, ignore_index=True)
    # Summing in member order keeps float results identical across replays.
    fused = scored.groupby(["query_id", "doc_id"], sort=True, as_index=False).agg(
        score=("score", "sum"), source_id=("source_id", "first")
    )
    fused = order_run(fused)
    fused = fused[fused["rank"] <= depth]
    empty = latency.index.difference(fused["query_id"].unique())
    misses = pd.DataFrame({"query_id": empty, "doc_id": None, "source_id": None, "score": None})
    out = pd.concat([fused, misses], ignore_index=True) if len(misses) else fused
    out["latency_ms"] = out["query_id"].map(latency)
    out["baseline_latency_ms"] = out["query_id"].map(reference)
    return tables.conform(order_run(out), tables.RUN).to_pandas()
