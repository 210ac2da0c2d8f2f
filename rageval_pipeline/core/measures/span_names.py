"""The span measures: named like every other measure, computed from evidence spans
and the retrieved chunks' extents rather than from qrels (`core.measures.spans`).

Each counts every evidence token once, so overlapping or duplicated chunks that hold the same
span earn nothing twice; `rel` is the lowest span grade that counts as evidence. Tokens are the
whitespace tokens of `core.suites.derived`. Definitions: docs/measures.md.

The three evidence measures also take a token budget in place of a rank cutoff
(`EvidenceRecall@512t`): the ranked list is read until its tokens reach the budget, the chunk
that crosses it cut to its leading tokens, so every chunking is judged on the same prompt size;
per-chunk cutoffs confound chunk size with quality (a top 10 of 512-token windows holds eight
times the text of a top 10 of sentences).
"""

from __future__ import annotations

from typing import ClassVar

from rageval_pipeline.core.measures.measure import Measure


class _Span(Measure):
    PARAMS: ClassVar[frozenset[str]] = frozenset({"rel"})
    USES_QRELS: ClassVar[bool] = False
    USES_SPANS: ClassVar[bool] = True
    BUDGETED: ClassVar[bool] = True


class EvidenceRecall(_Span):
    """Evidence recall@k: the judged span tokens held by the top k chunks, divided by all judged
    span tokens of the query (each token counted once). @Bt: by the first B tokens retrieved."""

    NAME = "EvidenceRecall"
    ALIASES = ("evidence_recall",)
    FAMILY = "recall"


class TokenPrecision(_Span):
    """Token precision@k (Smith & Troynikov 2024): the evidence tokens the top k chunks hold,
    divided by the tokens of the top k chunks summed, so a token retrieved twice costs twice.
    @Bt: of the first B tokens retrieved (all of them when the list holds fewer)."""

    NAME = "TokenPrecision"
    ALIASES = ("token_precision",)
    FAMILY = "ranking"


class TokenIoU(_Span):
    """Token IoU@k (Smith & Troynikov 2024): the evidence tokens the top k chunks hold, divided
    by the tokens of the top k chunks summed plus the evidence tokens they miss."""

    NAME = "TokenIoU"
    ALIASES = ("token_iou", "iou")
    FAMILY = "ranking"


class Tokens(_Span):
    """Tokens retrieved@k: the tokens of the top k chunks summed, the context a RAG prompt pays
    for (overlapping chunks pay twice). Not a regression when it grows: it is watched."""

    NAME = "Tokens"
    ALIASES = ("tokens_retrieved", "tokensretrieved")
    FAMILY = "budget"
    HIGHER_IS_BETTER = False
    PARAMS = frozenset()
    MAX_VALUE = float("inf")  # a count of tokens
    BUDGETED = False  # at a budget it is the budget itself


SPAN_FAMILIES = (EvidenceRecall, TokenPrecision, TokenIoU, Tokens)
