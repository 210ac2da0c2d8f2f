"""The per-measure kernels: each is a handful of `np.bincount` calls over the judged rows of a
`Prepared` run, for every query at once. Nothing loops over queries in Python."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rageval_pipeline.core.measures import names
from rageval_pipeline.core.measures.prepare import Prepared, cumcount

if TYPE_CHECKING:  # imported where used: `rageval eval`'s Arrow path loads no pandas
    import pandas as pd


def _ratio(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    out = np.zeros(np.shape(num), dtype=np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) > 0)
    return out


def _gain(labels: np.ndarray, kind: str) -> np.ndarray:
    labels = np.maximum(labels, 0).astype(np.float64)
    return labels if kind == "lin" else np.exp2(labels) - 1.0


def _precision(d: Prepared, m: names.Measure) -> np.ndarray:
    return d.count(m.rel, m.k) / m.k


def _recall(d: Prepared, m: names.Measure) -> np.ndarray:
    return _ratio(d.count(m.rel, m.k), d.num_rel(m.rel))


def _f1(d: Prepared, m: names.Measure) -> np.ndarray:
    p, r = _precision(d, m), _recall(d, m)
    return _ratio(2 * p * r, p + r)


def _reciprocal_rank(d: Prepared, m: names.Measure) -> np.ndarray:
    q, rank = d.relevant(m.rel, m.k)
    out = np.zeros(d.nq)
    queries, first = np.unique(q, return_index=True)
    out[queries] = 1.0 / rank[first]
    return out


def _average_precision(d: Prepared, m: names.Measure) -> np.ndarray:
    q, rank = d.relevant(m.rel, m.k)
    precision_at_hit = (cumcount(q) + 1) / rank
    return _ratio(np.bincount(q, precision_at_hit, minlength=d.nq), d.num_rel(m.rel))


def _r_precision(d: Prepared, m: names.Measure) -> np.ndarray:
    q, rank = d.relevant(m.rel)
    num_rel = d.num_rel(m.rel)
    return _ratio(np.bincount(q[rank <= num_rel[q]], minlength=d.nq), num_rel)


def _success(d: Prepared, m: names.Measure) -> np.ndarray:
    return (d.count(m.rel, m.k) > 0).astype(np.float64)


def _judged(d: Prepared, m: names.Measure) -> np.ndarray:
    return np.bincount(d.m_q[d.m_rank <= m.k], minlength=d.nq) / m.k


def _ndcg(d: Prepared, m: names.Measure) -> np.ndarray:
    top = (d.m_rank <= m.k) & (d.m_label > 0)
    gains = _gain(d.m_label[top], m.gain) / np.log2(d.m_rank[top] + 1.0)
    dcg = np.bincount(d.m_q[top], gains, minlength=d.nq)
    jq, jl, position = d.ideal_ranking()
    best = position < m.k
    ideal_gains = _gain(jl[best], m.gain) / np.log2(position[best] + 2.0)
    return _ratio(dcg, np.bincount(jq[best], ideal_gains, minlength=d.nq))


def _top_sources(d: Prepared, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(query index, source id) of every row ranked within the top k."""
    rank = np.arange(len(d.run.qidx)) - d.run.start[d.run.qidx] + 1
    rows = np.flatnonzero(rank <= k)
    found = d.run.doc_ids(rows)
    if d.sources is not None:  # a source id where the run gives one, else the doc id
        found = pc.coalesce(d.sources.take(pa.array(d.run.source_rows[rows])), found)
    return d.run.qidx[rows], found.to_numpy(zero_copy_only=False)


def _distinct_sources(d: Prepared, k: int) -> pd.DataFrame:
    import pandas as pd

    q, sources = _top_sources(d, k)
    frame = pd.DataFrame({"q": q, "source": sources})
    return frame.groupby(["q", "source"], sort=False).size().rename("n").reset_index()


def _diversity(d: Prepared, m: names.Measure) -> np.ndarray:
    return np.bincount(_distinct_sources(d, m.k)["q"], minlength=d.nq) / m.k


def _clustering(d: Prepared, m: names.Measure) -> np.ndarray:
    pairs = _distinct_sources(d, m.k)
    largest = np.zeros(d.nq)
    np.maximum.at(largest, pairs["q"].to_numpy(), pairs["n"].to_numpy())
    return _ratio(largest, np.minimum(d.run.n_ret, m.k))


def _entity_recall(d: Prepared, m: names.Measure) -> np.ndarray:
    import pandas as pd

    pairs = _distinct_sources(d, m.k)
    judged = pd.DataFrame(
        {"q": d.j_q, "source": d.j_docs.to_numpy(zero_copy_only=False), "label": d.j_label}
    )
    found = pairs.merge(judged[judged["label"] >= m.rel], on=["q", "source"])
    return _ratio(np.bincount(found["q"], minlength=d.nq), d.num_rel(m.rel))


KERNELS: dict[type[names.Measure], Callable[[Prepared, names.Measure], np.ndarray]] = {
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
# The kernels that group with pandas; every other one is numpy and Arrow alone.
PANDAS_KERNELS = frozenset({names.ER, names.Diversity, names.Clustering})
