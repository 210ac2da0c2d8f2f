"""Running queries through a retriever: timing per query, bounded concurrency, trec_eval order."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Protocol

import pandas as pd

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.ranking import order_run

# What a missing or truncated index file asks for (see core.storage.warehouse.verified_dir).
REBUILD_INDEX = "rebuild the index (materialize its <system>/index asset with force: true)"


class Hit(NamedTuple):
    doc_id: str  # the retrieved unit (chunk id for chunked systems)
    score: float
    source_id: str | None = None  # the corpus document; defaults to doc_id


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]: ...


Search = Callable[[str, int], Iterable[Hit]]


def _timed(search: Search, query_id: str, text: str, k: int) -> tuple[list[Hit], float]:
    """The hits of one query and the wall time of the call in milliseconds."""
    start = time.perf_counter()
    try:
        hits = list(search(text, k))
    except InputError as exc:
        # A retriever sees only the query text; name the query so the error can be acted on.
        field = f"query {query_id}" + (f": {exc.field}" if exc.field else "")
        raise InputError(exc.path, exc.problem, line=exc.line, field=field) from exc
    return hits, (time.perf_counter() - start) * 1000.0


def execute(
    search: Search,
    queries: pd.DataFrame,
    k: int,
    *,
    concurrency: int = 1,
    baseline: Search | None = None,
) -> pd.DataFrame:
    """Run every query (`query_id`, `text`) through `search`; return a RUN-shaped table.

    Latency is wall time of the `search` call for that query, in milliseconds. Each query's hits
    are cut to `k` after ordering, so a retriever that returns more cannot inflate a run.
    With `baseline` (the search of the baseline's configuration), each query is also timed
    through it, interleaved in alternating order (ABBA), so both timings share the machine's
    load and warm caches alike: they become `baseline_latency_ms`; its hits are dropped.
    """

    def one(position: int, row: tuple[str, str]) -> list[dict]:
        query_id, text = row
        baseline_ms = None
        if baseline is not None and position % 2:
            baseline_ms = _timed(baseline, query_id, text, k)[1]
        hits, latency_ms = _timed(search, query_id, text, k)
        if baseline is not None and not position % 2:
            baseline_ms = _timed(baseline, query_id, text, k)[1]
        timing = dict(latency_ms=latency_ms, baseline_latency_ms=baseline_ms)
        if not hits:
            return [dict(query_id=query_id, doc_id=None, source_id=None, score=None, **timing)]
        return [
            dict(
                query_id=query_id,
                doc_id=h.doc_id,
                source_id=h.source_id or h.doc_id,
                score=float(h.score),
                **timing,
            )
            for h in hits
        ]

    rows = list(zip(queries["query_id"], queries["text"].fillna(""), strict=True))
    if concurrency > 1 and baseline is None:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            per_query = list(pool.map(one, range(len(rows)), rows))
    else:
        per_query = [one(i, r) for i, r in enumerate(rows)]
    records = [r for rs in per_query for r in rs]
    if not records:
        return tables.empty(tables.RUN)
    run = order_run(pd.DataFrame.from_records(records))
    run = run[run["rank"].isna() | (run["rank"] <= k)]
    return tables.conform(run, tables.RUN).to_pandas()
