"""Computing the span measures (`span_names`) for every judged query of a run.

A query is evaluated when it has a span graded >= 1 (as the qrels measures need a label >= 1).
Its evidence is the union of the token positions (`core.suites.derived`) of its spans graded >= rel;
its top k are the first k retrieved ids in trec_eval order, each holding the tokens of its
extent. At a token budget B (`@512t`) the list is read in the same order and cut where its
tokens reach B: the chunk that crosses B keeps its leading tokens only, so exactly B tokens are
counted (fewer when the whole list holds fewer). Token sets are kept as merged intervals of
token positions per document, so a token held by several spans or chunks is counted once where
the definition says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import pandas as pd

from rageval_pipeline.core.io.ranking import order_run
from rageval_pipeline.core.measures import names
from rageval_pipeline.core.measures.compute import per_query_table
from rageval_pipeline.core.measures.prepare import JUDGED_LEVEL
from rageval_pipeline.core.measures.span_names import (
    EvidenceRecall,
    TokenIoU,
    TokenPrecision,
)
from rageval_pipeline.core.measures.span_names import Tokens as TokensRetrieved
from rageval_pipeline.core.suites.derived import Tokens

Intervals = dict[str, list[tuple[int, int]]]  # document -> sorted disjoint [first, stop)


def _merged(pieces: Iterable[tuple[str, int, int]]) -> Intervals:
    by_doc: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for doc, first, stop in pieces:
        if stop > first:
            by_doc[doc].append((first, stop))
    out: Intervals = {}
    for doc, ranges in by_doc.items():
        merged: list[list[int]] = []
        for first, stop in sorted(ranges):
            if merged and first <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([first, stop])
        out[doc] = [(a, b) for a, b in merged]
    return out


def _size(intervals: Intervals) -> int:
    return sum(b - a for ranges in intervals.values() for a, b in ranges)


def _shared(one: Intervals, other: Intervals) -> int:
    """Token positions in both (each set of intervals disjoint within a document)."""
    total = 0
    for doc, ranges in one.items():
        for a, b in ranges:
            for c, d in other.get(doc, ()):
                total += max(0, min(b, d) - max(a, c))
    return total


def evaluate_spans(
    run: pd.DataFrame,
    spans: pd.DataFrame,
    extents: pd.DataFrame,
    tokens: Tokens,
    measures: Sequence[str | names.Measure],
) -> pd.DataFrame:
    """Per-query values (query_id, measure, value) of span measures.

    `run`: a RUN table; `spans`: the SPANS of one split; `extents`: id, doc_id, start, end of
    every id the run may retrieve (a CHUNKS table's chunk_id renamed id, or whole documents);
    an id without an extent holds no token."""
    wanted = list(dict.fromkeys(names.parse_measure(m) for m in measures))
    first, stop = tokens.ranges(spans)
    graded = spans.assign(first=first, stop=stop)
    judged = sorted(
        graded.loc[graded["relevance"] >= JUDGED_LEVEL, "query_id"].astype(str).unique()
    )
    ext_first, ext_stop = tokens.ranges(extents)
    held = dict(
        zip(
            extents["id"].astype(str),
            zip(extents["doc_id"].astype(str), ext_first, ext_stop, strict=True),
            strict=True,
        )
    )
    ranked = order_run(run[run["doc_id"].notna()])
    lists = ranked.groupby("query_id", sort=False)["doc_id"].agg(list).to_dict()
    by_query = dict(tuple(graded.groupby(graded["query_id"].astype(str), sort=False)))
    queries, labelled, values = [], [], []
    for measure in wanted:
        for query in judged:
            mine = by_query[query]
            evidence = _merged(_rows(mine[mine["relevance"] >= measure.rel]))
            top = [held[i] for i in lists.get(query, [])[: measure.k] if i in held]
            if measure.budget is not None:
                top = _within_budget(top, measure.budget)
            if isinstance(measure, TokensRetrieved) and not any(b > a for _, a, b in top):
                # Nothing retrieved that holds a token: the query was dropped, and costing it 0
                # would read as a saving. Left without a value, the gate refuses to compare
                # the cost (`gate.evaluation.uncounted`).
                continue
            queries.append(query)
            labelled.append(str(measure))
            values.append(_value(measure, evidence, top))
    return per_query_table((queries, labelled, values))


def _rows(frame: pd.DataFrame) -> Iterable[tuple[str, int, int]]:
    return zip(frame["doc_id"].astype(str), frame["first"], frame["stop"], strict=True)


def _within_budget(top: list[tuple[str, int, int]], budget: int) -> list[tuple[str, int, int]]:
    """The ranked extents whose tokens, counted in rank order, fill `budget`: the one that
    crosses it cut to its leading tokens."""
    kept, left = [], budget
    for doc, first, stop in top:
        if left <= 0:
            break
        size = min(stop - first, left)
        kept.append((doc, first, first + size))
        left -= size
    return kept


def _value(measure: names.Measure, evidence: Intervals, top: list[tuple[str, int, int]]) -> float:
    retrieved = sum(stop - first for _, first, stop in top)
    if not isinstance(measure, EvidenceRecall | TokenPrecision | TokenIoU):
        return float(retrieved)  # Tokens@k
    hit = _shared(_merged(top), evidence)
    match measure:
        case EvidenceRecall():
            denominator = _size(evidence)
        case TokenPrecision():
            denominator = retrieved
        case TokenIoU():
            denominator = retrieved + _size(evidence) - hit
    return hit / denominator if denominator else 0.0
