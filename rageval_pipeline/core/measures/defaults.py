"""The measures used when nobody names any, and the one rule for a run's primary measure.

Plain canonical names, parsed where they are used: the CLI shows them in `--help` without
importing pydantic (`names`, 0.15 s).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

_M = TypeVar("_M")  # a Measure or its canonical name

# The measure a run is summarised by when it has it: in the gate's spike check and worst
# queries, the report's explanations and per-query plot, `scripts/evaluate`'s line per run and
# `rageval history`.
PRIMARY_MEASURE = "nDCG@10"

# Token budgets (whitespace tokens, `core.suites.derived`) at which the evidence measures are
# computed on every run with spans: the prompt sizes a chunking is compared at (the gate
# policy's `budgets` may name others). 512 is about a 10-section top 10 on techdocs (508
# tokens), 2048 four 512-token windows.
BUDGETS = (512, 1024, 2048)
# The evidence measures a chunking change is judged by at each budget (docs/gate.md).
BUDGET_FAMILIES = ("EvidenceRecall", "TokenPrecision")


def budget_measures(budgets: Iterable[int] = BUDGETS) -> tuple[str, ...]:
    """The budget-normalized evidence measures at `budgets`: EvidenceRecall@512t, ..."""
    return tuple(f"{family}@{b}t" for b in budgets for family in BUDGET_FAMILIES)


# What the pipeline measures on every run: the one default list.
DEFAULT_MEASURES = (
    "nDCG@10",
    "nDCG@5",
    "P@5",
    "P@10",
    "P(rel=2)@5",
    "R@5",
    "R@10",
    "R@100",
    "RR",
    # MRR counting only grade >= 2 (an answer, not context): on the golden suites, where each
    # query has many grade-1 targets, plain RR sits near its ceiling and moves little.
    "RR(rel=2)",
    "AP",
    "Success@10",
    "ER@5",
    "Diversity@10",
    "Clustering@10",
    # Judgment coverage, and condensed (judged-only) variants beside the standard measures: a
    # drop in the standard measure but not its condensed one points at missing judgments.
    "Judged@10",
    "nDCG(judged)@10",
    "P(judged)@10",
    # Span measures (suites with evidence spans only): each evidence token counted once, and
    # the context the top 10 cost.
    "EvidenceRecall@10",
    "TokenPrecision@10",
    "TokenIoU@10",
    "Tokens@10",
    # The same evidence at equal prompt sizes, whatever the chunk size: what compares chunkings.
    *budget_measures(),
)

# What `rageval eval` and `rageval compare` print when no -m is given, in trec_eval's order:
# its usual figures, a part of DEFAULT_MEASURES that a bare run file can give (ER, Diversity
# and Clustering need each chunk's source document, which a TREC run does not carry).
EVAL_MEASURES = ("nDCG@10", "RR", "P@5", "P@10", "R@10", "R@100", "AP")


def primary_measure(candidates: Iterable[_M], chosen: _M | None = None) -> _M | None:
    """The one measure a run is judged and explained by: `chosen` (the policy's
    `spike.measure`) when set, else PRIMARY_MEASURE when among `candidates`, else the first
    candidate (None when there is none). Candidates are measures or their canonical names."""
    if chosen:
        return chosen
    ordered = list(candidates)
    return next((m for m in ordered if str(m) == PRIMARY_MEASURE), ordered[0] if ordered else None)
