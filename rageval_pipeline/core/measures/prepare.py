"""Preparing a qrels table and a run for the measure kernels.

The run is put in trec_eval order once (an O(n) check; it is only sorted when it is not already
in that order) and judged documents are found by a join on integer keys (`join`); the result is a
`Prepared` holding only integer and Arrow arrays, in query-index space. A reader's RankedRun
comes checked, ordered and fingerprinted: it is taken as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.keys import arrow_strings, id_block_starts
from rageval_pipeline.core.io.ranking import RankedRun, index_type, order_run
from rageval_pipeline.core.measures.join import Judgments, OrderedRun, join

if TYPE_CHECKING:  # imported where used: `rageval eval`'s Arrow path loads no pandas
    import pandas as pd

# The lowest label that makes a query "judged" (evaluated), whatever a measure's threshold.
JUDGED_LEVEL = 1


def _require(df: pd.DataFrame | pa.Table, columns: Sequence[str], what: str) -> None:
    names = df.column_names if isinstance(df, pa.Table) else df.columns
    missing = [c for c in columns if c not in names]
    if missing:
        raise InputError(None, f"{what} table has no column {missing[0]!r}", field=missing[0])


@dataclass
class Prepared:
    universe: np.ndarray  # sorted query ids
    judged: np.ndarray  # per query: has a label >= JUDGED_LEVEL
    in_run: np.ndarray  # per query: has a row in the run (placeholders included)
    run: OrderedRun
    j_q: np.ndarray  # qrels: query index, label, doc id
    j_label: np.ndarray
    j_docs: pa.LargeStringArray
    m_q: np.ndarray  # retrieved and judged rows, sorted by (query, rank)
    m_rank: np.ndarray
    m_label: np.ndarray
    sources: pa.LargeStringArray | None
    judgments: Judgments  # the qrels' side of the join, for another run against them
    _num_rel: dict[int, np.ndarray] = field(default_factory=dict)
    _ideal: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def nq(self) -> int:
        return len(self.universe)

    def num_rel(self, rel: int) -> np.ndarray:
        if rel not in self._num_rel:
            wanted = self.j_label >= rel
            self._num_rel[rel] = np.bincount(self.j_q[wanted], minlength=self.nq)
        return self._num_rel[rel]

    def ideal_ranking(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, label, position from 0) of the judgments above 0, by query then label
        descending: each query's ideal ranking, which nDCG divides by."""
        if self._ideal is None:
            self._ideal = ideal_ranking(self.j_q, self.j_label)
        return self._ideal

    def relevant(self, rel: int, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(query, rank) of the retrieved relevant rows, optionally within the top k."""
        keep = self.m_label >= rel
        if k is not None:
            keep &= self.m_rank <= k
        return self.m_q[keep], self.m_rank[keep]

    def count(self, rel: int, k: int | None) -> np.ndarray:
        return np.bincount(self.relevant(rel, k)[0], minlength=self.nq)


def cumcount(groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of a grouped array."""
    idx = np.arange(len(groups))
    first = np.ones(len(groups), dtype=bool)
    first[1:] = groups[1:] != groups[:-1]
    return idx - np.maximum.accumulate(np.where(first, idx, 0))


def ideal_ranking(j_q: np.ndarray, j_label: np.ndarray) -> tuple[np.ndarray, ...]:
    """`Prepared.ideal_ranking` of these judgments. Labels below 2**31 make the order one int64
    key and one sort: 0.03 s of CPU for 1.1M judgments against a two-key lexsort's 0.05 s."""
    positive = j_label > 0
    jq, jl = j_q[positive], j_label[positive]
    if not len(jl) or jl.max() >= 2**31:
        order = np.lexsort((-jl, jq))
    else:
        order = np.argsort((jq.astype(np.int64) << 32) | (np.int64(2**31 - 1) - jl))
    jq, jl = jq[order], jl[order]
    return jq, jl, cumcount(jq)


def _query_index(
    run_queries: pa.LargeStringArray,
    qrels_queries: pa.LargeStringArray,
    run_starts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted union of query ids and each run row's / judgment's index into it.

    Tables grouped by query are encoded from the first id of each block of equal adjacent ids
    (thousands of blocks for millions of rows; `run_starts`: the run's, when its reader found
    them); other tables through an Arrow dictionary. The union is sorted by Arrow (byte order,
    which is code point order, as Python sorts str): 50,000 queries' 100,000 heads took 0.07 s
    of CPU through numpy's sort of Python strings, 0.02 s so."""

    def encode(
        ids: pa.LargeStringArray, firsts: np.ndarray | None = None
    ) -> tuple[pa.Array, np.ndarray | None, np.ndarray | None]:
        """(distinct-ish ids, each row's index into them or None, block sizes or None)."""
        if firsts is None:
            firsts = id_block_starts(ids)
        if len(firsts) * 16 > len(ids) > 4096:
            encoded = pc.dictionary_encode(ids)
            return encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False), None
        return ids.take(pa.array(firsts)), None, np.diff(np.r_[firsts, len(ids)])

    run_heads, run_rows, run_sizes = encode(run_queries, run_starts)
    qrels_heads, qrels_rows, qrels_sizes = encode(qrels_queries)
    heads = pc.dictionary_encode(pa.concat_arrays([run_heads, qrels_heads]))
    distinct = heads.dictionary
    by_id = pc.sort_indices(distinct).to_numpy()
    position = np.empty(len(by_id), dtype=index_type(len(by_id)))  # per-row arrays: 4 bytes
    position[by_id] = np.arange(len(by_id))
    inverse = position[heads.indices.to_numpy(zero_copy_only=False)]
    universe = distinct.take(pa.array(by_id)).to_numpy(zero_copy_only=False)
    run_codes, qrels_codes = inverse[: len(run_heads)], inverse[len(run_heads) :]
    return (
        universe,
        run_codes[run_rows] if run_sizes is None else np.repeat(run_codes, run_sizes),
        qrels_codes[qrels_rows] if qrels_sizes is None else np.repeat(qrels_codes, qrels_sizes),
    )


def _block_starts(qidx: np.ndarray) -> np.ndarray:
    """Positions where a new run of equal query indexes begins."""
    if not len(qidx):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, qidx[1:] != qidx[:-1]])


def _trec_permutation(
    qidx: np.ndarray, score: np.ndarray, docs: pa.LargeStringArray, firsts: np.ndarray
) -> np.ndarray | None:
    """The permutation putting rows in trec_eval order (grouped by query, score desc, doc id
    desc), or None when they already are. `firsts` are the rows' block starts.

    Runs usually arrive grouped by query with scores descending, so that is checked in O(n) and
    only the rows with tied scores are reordered then; ties are broken by core.io.ranking.order_run
    itself, so the rule lives in one place.
    """
    n = len(qidx)
    same = np.ones(max(n - 1, 0), dtype=bool)
    same[firsts[1:] - 1] = False  # same[i]: rows i and i+1 belong to one query
    order = None
    grouped = len(np.unique(qidx[firsts])) == len(firsts)
    if not grouped or np.any(same & (score[1:] > score[:-1])):
        # Two passes, the second stable: by score desc, then by query.
        order = np.argsort(-score)
        by_query = qidx[order]
        if by_query.max(initial=0) < 2**16:  # numpy radix-sorts 16-bit keys
            by_query = by_query.astype(np.uint16)
        order = order[np.argsort(by_query, kind="stable")]
        qs = qidx[order]
        same = qs[1:] == qs[:-1]
    ss = score if order is None else score[order]
    tie = np.flatnonzero(same & (ss[1:] == ss[:-1]))
    if not tie.size:
        return order
    if order is None:
        descending = pc.greater(docs.take(pa.array(tie)), docs.take(pa.array(tie + 1)))
        if pc.all(descending).as_py():
            return None
        order = np.arange(n, dtype=index_type(n))
    import pandas as pd

    positions = np.union1d(tie, tie + 1)
    rows = order[positions]
    # The query block of each tied row: how many blocks start at or before it.
    starts = np.flatnonzero(~same) + 1
    tied_rows = pd.DataFrame(
        {
            "query_id": np.searchsorted(starts, positions, side="right"),
            "doc_id": docs.take(pa.array(rows)).to_numpy(zero_copy_only=False),
            "score": score[rows],
            "row": rows,
        }
    )
    # Keyed by query block, order_run's (query, score desc) order is the order the tied rows
    # already have, so only its doc-id tie-break moves them.
    order[positions] = order_run(tied_rows)["row"].to_numpy()
    return order


def _prepare_run(run: pd.DataFrame, qidx: np.ndarray, nq: int) -> OrderedRun:
    import pandas as pd

    docs = arrow_strings(run["doc_id"])
    score = pd.to_numeric(run["score"]).to_numpy(dtype=np.float64, na_value=np.nan)
    rows = np.arange(len(run), dtype=index_type(len(run)))
    if docs.null_count:  # placeholder rows of queries that returned nothing
        rows = np.flatnonzero(docs.is_valid().to_numpy(zero_copy_only=False))
        docs = docs.take(pa.array(rows))
        qidx, score = qidx[rows], score[rows]
    if np.isnan(score).any():
        bad = rows[np.flatnonzero(np.isnan(score))[0]]
        raise InputError(
            None,
            f"query {run['query_id'].iloc[bad]!r}, doc {run['doc_id'].iloc[bad]!r} has no score",
            field="score",
        )
    order = _trec_permutation(qidx, score, docs, _block_starts(qidx))
    return _ordered(qidx, rows, nq, docs, order, None, unique_keys=False)


def _ranked_run(run: RankedRun, qidx: np.ndarray, nq: int) -> OrderedRun:
    """A reader's checked and ordered run, taken as it is."""
    keys = run.pair_keys  # (None when the reader found colliding keys: the join makes its own)
    return _ordered(
        qidx,
        None,
        nq,
        run.doc_id,
        run.order,
        keys,
        unique_keys=keys is not None,
        firsts=run.starts,  # (a grouped file's order moves rows within each query only)
    )


def _ordered(
    qidx: np.ndarray,
    rows: np.ndarray | None,
    nq: int,
    docs: pa.LargeStringArray,
    order: np.ndarray | None,
    keys: np.ndarray | None,
    unique_keys: bool,
    firsts: np.ndarray | None = None,
) -> OrderedRun:
    """The OrderedRun of rows (of the caller's table; None: all of them) with these query
    indexes, doc ids and keys (in `order` already), put in `order` (None: already in
    trec_eval order). `firsts`: the rows' block starts, given when `order` moves rows within
    their query only."""
    doc_qidx = qidx
    if rows is None:
        rows = order if order is not None else np.arange(len(qidx), dtype=index_type(len(qidx)))
    elif order is not None:
        rows = rows[order]
    if firsts is None:
        if order is not None:
            qidx = qidx[order]
        firsts = _block_starts(qidx)
    n_ret = np.zeros(nq, dtype=np.int64)
    start = np.zeros(nq, dtype=np.int64)
    n_ret[qidx[firsts]] = np.diff(np.r_[firsts, len(qidx)])
    start[qidx[firsts]] = firsts
    return OrderedRun(
        qidx=qidx,
        source_rows=rows,
        start=start,
        n_ret=n_ret,
        docs=docs,
        doc_qidx=doc_qidx,
        doc_order=order,
        keys=keys,
        unique_keys=unique_keys,
    )


def query_ids(table: pd.DataFrame | pa.Table | RankedRun) -> pa.LargeStringArray:
    """The query id of each row of a qrels or run table (pandas or Arrow), or of a reader's
    RankedRun."""
    return table.query_id if isinstance(table, RankedRun) else arrow_strings(table["query_id"])


def distinct_query_ids(table: pd.DataFrame | pa.Table | RankedRun) -> pa.LargeStringArray:
    """The distinct query ids of a qrels or run table, or of a reader's RankedRun."""
    return table.queries if isinstance(table, RankedRun) else pc.unique(query_ids(table))


def has_nulls(column: pd.Series | pa.ChunkedArray) -> bool:
    """Whether a pandas or Arrow column has a missing value."""
    if isinstance(column, pa.ChunkedArray | pa.Array):
        return column.null_count > 0
    return bool(column.isna().any())


def labels(qrels: pd.DataFrame | pa.Table, missing: int | None = None) -> np.ndarray:
    """The qrels' relevance labels as int64 (pandas or Arrow); a missing one is `missing`
    (None: there is none)."""
    column = qrels["relevance"]
    if isinstance(column, pa.ChunkedArray):
        column = column if missing is None else column.fill_null(missing)
        return column.to_numpy().astype(np.int64)
    if missing is not None:
        return column.to_numpy(dtype=np.int64, na_value=missing)
    import pandas as pd

    return pd.to_numeric(column).to_numpy(dtype=np.int64)


def prepare(
    qrels: pd.DataFrame | pa.Table,
    run: pd.DataFrame | RankedRun,
    judgments: Judgments | None = None,
    *,
    ideal: bool = False,
) -> Prepared:
    """`qrels`: a QRELS table, pandas or Arrow; `judgments`: `Judgments.of(qrels)`, when the
    caller made it ahead; `ideal`: make the `ideal_ranking` too.

    Named fast path: the ideal ranking depends on the judgments alone, so it is made in a
    second thread beside the join, which leaves that core idle (bench/README.md, "Fast paths
    in one place": 0.05-0.07 s of 0.45 s of scoring on 50,000 queries and 1.5M judgments)."""
    ranked = isinstance(run, RankedRun)
    _require(qrels, ("query_id", "doc_id", "relevance"), "qrels")
    tables = [("qrels", qrels)]
    if not ranked:  # (a RankedRun is checked by its reader)
        _require(run, ("query_id", "doc_id", "score"), "run")
        tables.append(("run", run))
    for what, table in tables:
        if has_nulls(table["query_id"]):
            raise InputError(None, f"{what} has a row without query_id", field="query_id")
    if has_nulls(qrels["doc_id"]) or has_nulls(qrels["relevance"]):
        column = "doc_id" if has_nulls(qrels["doc_id"]) else "relevance"
        raise InputError(None, f"qrels has a row without {column}", field=column)

    j_queries = query_ids(qrels)
    run_starts = run.starts if ranked else None
    universe, run_qidx, j_q = _query_index(query_ids(run), j_queries, run_starts)
    nq = len(universe)
    j_label = labels(qrels)
    j_docs = arrow_strings(qrels["doc_id"])
    firsts = run_starts if run_starts is not None else _block_starts(run_qidx)
    in_run = np.zeros(nq, dtype=bool)
    in_run[run_qidx[firsts]] = True
    distinct = pa.array(universe, pa.large_string())
    ordered = _ranked_run(run, run_qidx, nq) if ranked else _prepare_run(run, run_qidx, nq)

    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(ideal_ranking, j_q, j_label) if ideal else None
        run_rows, j_rows, judgments = join(ordered, j_q, j_docs, universe, distinct, judgments)
        best = None if ahead is None else ahead.result()
    m_q = ordered.qidx[run_rows]
    m_rank = run_rows - ordered.start[m_q] + 1
    m_label = j_label[j_rows]
    # The join gives run rows ascending, each query's contiguous and by rank: a stable sort
    # by query alone orders them by (query, rank), at a fraction of a two-key lexsort's cost.
    order = np.argsort(m_q, kind="stable")
    judged = np.bincount(j_q[j_label >= JUDGED_LEVEL], minlength=nq) > 0
    has_sources = not ranked and "source_id" in run.columns  # (a RankedRun's are its doc ids)
    sources = arrow_strings(run["source_id"]) if has_sources else None
    return Prepared(
        universe=universe,
        judged=judged,
        in_run=in_run,
        run=ordered,
        j_q=j_q,
        j_label=j_label,
        j_docs=j_docs,
        m_q=m_q[order],
        m_rank=m_rank[order],
        m_label=m_label[order],
        sources=sources,
        judgments=judgments,
        _ideal=best,
    )
