"""Computing measures for every query of a run at once.

The run is put in trec_eval order once (an O(n) check; it is only sorted when it is not already
in that order), judged documents are found by a join on integer keys, and every measure is a
handful of `np.bincount` calls over the judged rows. Nothing loops over queries in Python.

Semantics (docs/measures.md): a query is evaluated when the qrels give it at least one label >= 1;
such a query with no retrieved document scores 0 on every measure; queries without a relevant
judgment are left out and listed by `unjudged_queries`; a doc id twice for one query is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures import names
from rageval_pipeline.core.measures.condensed import judged_only
from rageval_pipeline.core.measures.keys import arrow_strings, exact_pair_keys, fingerprint
from rageval_pipeline.core.ranking import order_run

# The lowest label that makes a query "judged" (evaluated), whatever a measure's threshold.
JUDGED_LEVEL = 1


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(None, f"{what} table has no column {missing[0]!r}", field=missing[0])


@dataclass
class _OrderedRun:
    """The retrieved rows in trec_eval order, in query-index space."""

    qidx: np.ndarray  # query index of each row (rows of one query are contiguous)
    source_rows: np.ndarray  # row of the caller's table each ordered row came from
    start: np.ndarray  # first row of each query (meaningless where n_ret is 0)
    n_ret: np.ndarray  # rows per query
    # The doc ids stay in the caller's order (moving millions of strings costs more than
    # moving their integer keys); `doc_order[i]` is the position of ordered row i among them.
    docs: pa.LargeStringArray
    doc_qidx: np.ndarray  # query index of each of `docs`
    doc_order: np.ndarray | None  # None: already in order

    def doc_ids(self, rows: np.ndarray) -> pa.LargeStringArray:
        """The doc ids of the given ordered rows."""
        return self.docs.take(pa.array(rows if self.doc_order is None else self.doc_order[rows]))

    def in_order(self, per_doc: np.ndarray) -> np.ndarray:
        """An array aligned with `docs`, put in row order."""
        return per_doc if self.doc_order is None else per_doc[self.doc_order]


@dataclass
class _Data:
    universe: np.ndarray  # sorted query ids
    judged: np.ndarray  # per query: has a label >= JUDGED_LEVEL
    in_run: np.ndarray  # per query: has a row in the run (placeholders included)
    run: _OrderedRun
    j_q: np.ndarray  # qrels: query index, label, doc id
    j_label: np.ndarray
    j_docs: pa.LargeStringArray
    m_q: np.ndarray  # retrieved and judged rows, sorted by (query, rank)
    m_rank: np.ndarray
    m_label: np.ndarray
    sources: pa.LargeStringArray | None
    _num_rel: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def nq(self) -> int:
        return len(self.universe)

    def num_rel(self, rel: int) -> np.ndarray:
        if rel not in self._num_rel:
            wanted = self.j_label >= rel
            self._num_rel[rel] = np.bincount(self.j_q[wanted], minlength=self.nq)
        return self._num_rel[rel]

    def relevant(self, rel: int, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(query, rank) of the retrieved relevant rows, optionally within the top k."""
        keep = self.m_label >= rel
        if k is not None:
            keep &= self.m_rank <= k
        return self.m_q[keep], self.m_rank[keep]

    def count(self, rel: int, k: int | None) -> np.ndarray:
        return np.bincount(self.relevant(rel, k)[0], minlength=self.nq)


def _ratio(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    out = np.zeros(np.shape(num), dtype=np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) > 0)
    return out


def _cumcount(groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of a grouped array."""
    idx = np.arange(len(groups))
    first = np.ones(len(groups), dtype=bool)
    first[1:] = groups[1:] != groups[:-1]
    return idx - np.maximum.accumulate(np.where(first, idx, 0))


def _gain(labels: np.ndarray, kind: str) -> np.ndarray:
    labels = np.maximum(labels, 0).astype(np.float64)
    return labels if kind == "lin" else np.exp2(labels) - 1.0


def _precision(d: _Data, m: names.Measure) -> np.ndarray:
    return d.count(m.rel, m.k) / m.k


def _recall(d: _Data, m: names.Measure) -> np.ndarray:
    return _ratio(d.count(m.rel, m.k), d.num_rel(m.rel))


def _f1(d: _Data, m: names.Measure) -> np.ndarray:
    p, r = _precision(d, m), _recall(d, m)
    return _ratio(2 * p * r, p + r)


def _reciprocal_rank(d: _Data, m: names.Measure) -> np.ndarray:
    q, rank = d.relevant(m.rel, m.k)
    out = np.zeros(d.nq)
    queries, first = np.unique(q, return_index=True)
    out[queries] = 1.0 / rank[first]
    return out


def _average_precision(d: _Data, m: names.Measure) -> np.ndarray:
    q, rank = d.relevant(m.rel, m.k)
    precision_at_hit = (_cumcount(q) + 1) / rank
    return _ratio(np.bincount(q, precision_at_hit, minlength=d.nq), d.num_rel(m.rel))


def _r_precision(d: _Data, m: names.Measure) -> np.ndarray:
    q, rank = d.relevant(m.rel)
    num_rel = d.num_rel(m.rel)
    return _ratio(np.bincount(q[rank <= num_rel[q]], minlength=d.nq), num_rel)


def _success(d: _Data, m: names.Measure) -> np.ndarray:
    return (d.count(m.rel, m.k) > 0).astype(np.float64)


def _judged(d: _Data, m: names.Measure) -> np.ndarray:
    return np.bincount(d.m_q[d.m_rank <= m.k], minlength=d.nq) / m.k


def _ndcg(d: _Data, m: names.Measure) -> np.ndarray:
    top = (d.m_rank <= m.k) & (d.m_label > 0)
    gains = _gain(d.m_label[top], m.gain) / np.log2(d.m_rank[top] + 1.0)
    dcg = np.bincount(d.m_q[top], gains, minlength=d.nq)
    positive = d.j_label > 0
    jq, jl = d.j_q[positive], d.j_label[positive]
    order = np.lexsort((-jl, jq))
    jq, jl = jq[order], jl[order]
    position = _cumcount(jq)
    best = position < m.k
    ideal_gains = _gain(jl[best], m.gain) / np.log2(position[best] + 2.0)
    return _ratio(dcg, np.bincount(jq[best], ideal_gains, minlength=d.nq))


def _top_sources(d: _Data, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(query index, source id) of every row ranked within the top k."""
    rank = np.arange(len(d.run.qidx)) - d.run.start[d.run.qidx] + 1
    rows = np.flatnonzero(rank <= k)
    sources = d.sources.take(pa.array(d.run.source_rows[rows]))
    fallback = d.run.doc_ids(rows)
    return d.run.qidx[rows], pc.coalesce(sources, fallback).to_numpy(zero_copy_only=False)


def _distinct_sources(d: _Data, k: int) -> pd.DataFrame:
    q, sources = _top_sources(d, k)
    frame = pd.DataFrame({"q": q, "source": sources})
    return frame.groupby(["q", "source"], sort=False).size().rename("n").reset_index()


def _diversity(d: _Data, m: names.Measure) -> np.ndarray:
    return np.bincount(_distinct_sources(d, m.k)["q"], minlength=d.nq) / m.k


def _clustering(d: _Data, m: names.Measure) -> np.ndarray:
    pairs = _distinct_sources(d, m.k)
    largest = np.zeros(d.nq)
    np.maximum.at(largest, pairs["q"].to_numpy(), pairs["n"].to_numpy())
    return _ratio(largest, np.minimum(d.run.n_ret, m.k))


def _entity_recall(d: _Data, m: names.Measure) -> np.ndarray:
    pairs = _distinct_sources(d, m.k)
    judged = pd.DataFrame(
        {"q": d.j_q, "source": d.j_docs.to_numpy(zero_copy_only=False), "label": d.j_label}
    )
    found = pairs.merge(judged[judged["label"] >= m.rel], on=["q", "source"])
    return _ratio(np.bincount(found["q"], minlength=d.nq), d.num_rel(m.rel))


_COMPUTE: dict[type[names.Measure], Callable[[_Data, names.Measure], np.ndarray]] = {
    names.P: _precision,
    names.R: _recall,
    names.F1: _f1,
    names.RR: _reciprocal_rank,
    names.nDCG: _ndcg,
    names.AP: _average_precision,
    names.Success: _success,
    names.Rprec: _r_precision,
    names.Judged: _judged,
    names.ER: _entity_recall,
    names.Diversity: _diversity,
    names.Clustering: _clustering,
}


def _query_index(
    run_queries: pa.LargeStringArray, qrels_queries: pa.LargeStringArray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted union of query ids and each run row's / judgment's index into it.

    Tables grouped by query are encoded from the first id of each block of equal adjacent ids
    (thousands of blocks for millions of rows); other tables through an Arrow dictionary.
    """

    def encode(ids: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """(distinct-ish ids, each row's index into them or None, block sizes)."""
        change = pc.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False)
        firsts = np.flatnonzero(np.r_[True, change]) if len(ids) else np.zeros(0, np.int64)
        if len(firsts) * 16 > len(ids) > 4096:
            encoded = pc.dictionary_encode(ids)
            indices = encoded.indices.to_numpy(zero_copy_only=False)
            return encoded.dictionary.to_numpy(zero_copy_only=False), indices, None
        heads = ids.take(pa.array(firsts)).to_numpy(zero_copy_only=False)
        return heads, None, np.diff(np.r_[firsts, len(ids)])

    run_heads, run_rows, run_sizes = encode(run_queries)
    qrels_heads, qrels_rows, qrels_sizes = encode(qrels_queries)
    universe, inverse = np.unique(
        np.concatenate([run_heads, qrels_heads]).astype(object), return_inverse=True
    )
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
    only the rows with tied scores are reordered then; ties are broken by core.ranking.order_run
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
        order = np.arange(n)
    positions = np.union1d(tie, tie + 1)
    rows = order[positions]
    block = np.concatenate([[0], np.cumsum(~same)])
    tied_rows = pd.DataFrame(
        {
            "query_id": block[positions],
            "doc_id": docs.take(pa.array(rows)).to_numpy(zero_copy_only=False),
            "score": score[rows],
            "row": rows,
        }
    )
    # Keyed by query block, order_run's (query, score desc) order is the order the tied rows
    # already have, so only its doc-id tie-break moves them.
    order[positions] = order_run(tied_rows)["row"].to_numpy()
    return order


def _prepare_run(run: pd.DataFrame, qidx: np.ndarray, nq: int) -> _OrderedRun:
    docs = arrow_strings(run["doc_id"])
    score = pd.to_numeric(run["score"]).to_numpy(dtype=np.float64, na_value=np.nan)
    rows = np.arange(len(run))
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
    firsts = _block_starts(qidx)
    doc_qidx = qidx
    order = _trec_permutation(qidx, score, docs, firsts)
    if order is not None:
        qidx, rows = qidx[order], rows[order]
        firsts = _block_starts(qidx)
    n_ret = np.zeros(nq, dtype=np.int64)
    start = np.zeros(nq, dtype=np.int64)
    n_ret[qidx[firsts]] = np.diff(np.r_[firsts, len(qidx)])
    start[qidx[firsts]] = firsts
    return _OrderedRun(
        qidx=qidx,
        source_rows=rows,
        start=start,
        n_ret=n_ret,
        docs=docs,
        doc_qidx=doc_qidx,
        doc_order=order,
    )


def _first_duplicate(
    keys: np.ndarray, qidx: np.ndarray, doc_ids: Callable[[np.ndarray], pa.LargeStringArray]
) -> tuple[bool, int | None]:
    """(any equal keys?, first row whose (query, doc) really repeats an earlier row)."""
    ordered = np.sort(keys)
    equal = ordered[1:] == ordered[:-1]
    if not equal.any():
        return False, None
    rows = np.flatnonzero(np.isin(keys, ordered[1:][equal]))
    frame = pd.DataFrame({"q": qidx[rows], "doc": doc_ids(rows).to_numpy(zero_copy_only=False)})
    repeats = rows[frame.duplicated().to_numpy()]
    return True, (int(repeats[0]) if repeats.size else None)


def _join(
    run: _OrderedRun,
    j_q: np.ndarray,
    j_docs: pa.LargeStringArray,
    universe: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(run row, judgment row) of every retrieved judged document; also rejects duplicates.

    Fingerprints are verified on the real ids; any collision reruns with exact codes.
    """
    if exact:
        codes, _ = pd.factorize(
            np.concatenate(
                [
                    run.docs.to_numpy(zero_copy_only=False),
                    j_docs.to_numpy(zero_copy_only=False),
                ]
            )
        )
        run_keys = exact_pair_keys(run.doc_qidx, codes[: len(run.docs)])
        j_keys = exact_pair_keys(j_q, codes[len(run.docs) :])
    else:
        run_keys, j_keys = fingerprint(run.docs, run.doc_qidx), fingerprint(j_docs, j_q)
    run_keys = run.in_order(run_keys)

    clash, repeat = _first_duplicate(run_keys, run.qidx, run.doc_ids)
    if repeat is not None:
        doc = run.doc_ids(np.array([repeat]))[0].as_py()
        raise InputError(
            None,
            f"query {universe[run.qidx[repeat]]!r} retrieves doc {doc!r} more than once",
            field="doc_id",
        )
    j_clash, j_repeat = _first_duplicate(j_keys, j_q, lambda rows: j_docs.take(pa.array(rows)))
    if j_repeat is not None:
        raise InputError(
            None,
            f"qrels judge doc {j_docs[j_repeat].as_py()!r} for query "
            f"{universe[j_q[j_repeat]]!r} more than once",
            field="doc_id",
        )
    if (clash or j_clash) and not exact:
        return _join(run, j_q, j_docs, universe, exact=True)
    if not len(j_keys) or not len(run_keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)

    j_order = np.argsort(j_keys)
    j_sorted = j_keys[j_order]
    # A bitmap on the low key bits rejects most unjudged rows before the binary search.
    bits = int(np.clip(np.ceil(np.log2(len(j_keys))) + 4, 10, 24))
    mask = np.uint64((1 << bits) - 1)
    bitmap = np.zeros(1 << bits, dtype=bool)
    bitmap[j_sorted & mask] = True
    candidates = np.flatnonzero(bitmap[run_keys & mask])
    # Probing in key order keeps the binary searches in cache.
    candidates = candidates[np.argsort(run_keys[candidates])]
    at = np.minimum(np.searchsorted(j_sorted, run_keys[candidates]), len(j_sorted) - 1)
    found = j_sorted[at] == run_keys[candidates]
    run_rows, j_rows = candidates[found], j_order[at[found]]
    by_row = np.argsort(run_rows)
    run_rows, j_rows = run_rows[by_row], j_rows[by_row]
    if not exact:
        same_query = np.array_equal(run.qidx[run_rows], j_q[j_rows])
        same_doc = pc.all(pc.equal(run.doc_ids(run_rows), j_docs.take(pa.array(j_rows)))).as_py()
        if not (same_query and same_doc in (True, None)):
            return _join(run, j_q, j_docs, universe, exact=True)
    return run_rows, j_rows


def _prepare(qrels: pd.DataFrame, run: pd.DataFrame) -> _Data:
    _require(qrels, ("query_id", "doc_id", "relevance"), "qrels")
    _require(run, ("query_id", "doc_id", "score"), "run")
    for what, table in (("qrels", qrels), ("run", run)):
        if table["query_id"].isna().any():
            raise InputError(None, f"{what} has a row without query_id", field="query_id")
    if qrels["doc_id"].isna().any() or qrels["relevance"].isna().any():
        column = "doc_id" if qrels["doc_id"].isna().any() else "relevance"
        raise InputError(None, f"qrels has a row without {column}", field=column)

    run_queries = arrow_strings(run["query_id"])
    qrels_queries = arrow_strings(qrels["query_id"])
    universe, run_qidx, j_q = _query_index(run_queries, qrels_queries)
    nq = len(universe)
    j_label = pd.to_numeric(qrels["relevance"]).to_numpy(dtype=np.int64)
    j_docs = arrow_strings(qrels["doc_id"])
    in_run = np.zeros(nq, dtype=bool)
    in_run[run_qidx[_block_starts(run_qidx)]] = True
    ordered = _prepare_run(run, run_qidx, nq)

    run_rows, j_rows = _join(ordered, j_q, j_docs, universe, exact=False)
    m_q = ordered.qidx[run_rows]
    m_rank = run_rows - ordered.start[m_q] + 1
    m_label = j_label[j_rows]
    order = np.lexsort((m_rank, m_q))
    judged = np.bincount(j_q[j_label >= JUDGED_LEVEL], minlength=nq) > 0
    sources = arrow_strings(run["source_id"]) if "source_id" in run.columns else None
    return _Data(
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
        sources=sources if sources is not None else arrow_strings(run["doc_id"]),
    )


def evaluate(
    qrels: pd.DataFrame, run: pd.DataFrame, measures: Sequence[str | names.Measure]
) -> pd.DataFrame:
    """Per-query values: columns query_id, measure (canonical name), value.

    Measures that use qrels get a row for every judged query (a label >= 1), retrieved or not;
    Diversity@k and Clustering@k also for every other query of the run. Rows come by measure in
    the order asked, then by query id.
    """
    wanted = list(dict.fromkeys(names.parse_measure(m) for m in measures))
    data = _prepare(qrels, run)
    # Condensed variants rank the judged documents only; the judged queries are the same.
    condensed = _prepare(qrels, judged_only(qrels, run)) if any(m.judged for m in wanted) else None
    query_ids, labels, values = [], [], []
    for measure in wanted:
        source = condensed if measure.judged and condensed is not None else data
        per_query = _COMPUTE[type(measure)](source, measure)
        keep = source.judged if measure.USES_QRELS else source.judged | source.in_run
        query_ids.append(source.universe[keep])
        labels.append(np.full(int(keep.sum()), str(measure), dtype=object))
        values.append(per_query[keep])
    if not wanted:
        return pd.DataFrame(
            {"query_id": pd.Series(dtype="str"), "measure": pd.Series(dtype="str"), "value": []}
        )
    return pd.DataFrame(
        {
            "query_id": pd.array(np.concatenate(query_ids), dtype="str"),
            "measure": pd.array(np.concatenate(labels), dtype="str"),
            "value": np.concatenate(values).astype(np.float64),
        }
    )


def unjudged_queries(qrels: pd.DataFrame, run: pd.DataFrame) -> list[str]:
    """Query ids of the run or the qrels with no label >= 1: left out of every qrels measure."""
    judged = set(qrels.loc[qrels["relevance"] >= JUDGED_LEVEL, "query_id"].astype(str))
    seen = set(run["query_id"].astype(str)) | set(qrels["query_id"].astype(str))
    return sorted(seen - judged)
