"""A golden suite's query (`golden.Query`): its graded judgments of documents or chunks, or
its evidence spans, checked against the suite's documents when the suite is validated."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from rageval_pipeline.core.io.config import rule
from rageval_pipeline.core.suites.evidence import (
    Evidence,
    Move,
    Reference,
    Span,
    SpanJudgment,
    check_primary,
)
from rageval_pipeline.core.suites.fields import Grade, Id, StrictModel
from rageval_pipeline.core.suites.matching import (
    Level,
    TargetError,
    resolve_target,
    split_chunk_id,
)
from rageval_pipeline.core.suites.spans import QuoteError


class Query(StrictModel):
    """A query and its graded judgments of documents or of chunks, or its evidence spans."""

    id: Id
    query: str = Field(description="may be empty only when query_type is edge")
    intent: str = Field(min_length=1, description="free label, e.g. factual, procedural")
    category: str | None = None
    difficulty: Literal["easy", "medium", "hard"] | None = None
    query_type: Literal["specific", "broad", "paraphrase", "edge"] = "specific"
    description: str | None = None
    judgments: dict[str, Grade] = Field(
        default_factory=dict,
        description="target (document id or chunk id, one level per query) -> grade 0..3",
    )
    spans: list[SpanJudgment] = Field(
        default_factory=list,
        description="graded evidence spans (instead of judgments): chunk level",
    )
    primary: str | None = Field(None, description="the judgments target with the highest grade")
    top_1_chunk: str | None = Field(None, description="the chunk that should rank first")
    top_1_span: Span | None = Field(None, description="the span that should rank first")

    _ids: dict[str, str] = PrivateAttr(default_factory=dict)  # target as written -> resolved id
    _top_1_chunk_id: str | None = PrivateAttr(None)
    _evidence: list[Evidence] = PrivateAttr(default_factory=list)  # per span, where it is now
    _decisive: list[tuple[int, int]] = PrivateAttr(default_factory=list)  # per span, its extent
    _derived: list[tuple[str, int]] = PrivateAttr(default_factory=list)  # spans' chunk grades
    _moves: list[Move] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _rules(self) -> Query:
        edge = self.query_type == "edge"
        if not edge and not self.query.strip():
            raise rule(("query",), "must not be empty unless query_type is edge")
        if len({split_chunk_id(t) is None for t in self.judgments}) > 1:
            raise rule(("judgments",), "mixes document and chunk targets; use one level")
        if self.judgments and self.spans:
            raise rule(("spans",), "give judgments or spans, not both")
        if self.top_1_chunk is not None and self.top_1_span is not None:
            raise rule(("top_1_span",), "give top_1_chunk or top_1_span, not both")
        best = max(self.grades, default=0)
        if best == 0 and not edge and self.judged:
            field = "spans" if self.spans else "judgments"
            raise rule((field,), "needs a target with grade >= 1 unless query_type is edge")
        if self.spans:
            check_primary(self.spans, self.primary, best)
        elif self.primary is None:
            if best >= 1:
                raise rule(("primary",), "field required when a target has grade >= 1")
        elif best == 0:
            raise rule(("primary",), "must be absent when no target has grade >= 1")
        elif self.primary not in self.judgments:
            raise rule(("primary",), f"{self.primary!r} is not a target in judgments")
        elif self.judgments[self.primary] != best:
            raise rule(
                ("primary",),
                f"{self.primary!r} has grade {self.judgments[self.primary]}, "
                f"but the highest grade in judgments is {best}",
            )
        if self.top_1_chunk is not None and split_chunk_id(self.top_1_chunk) is None:
            raise rule(("top_1_chunk",), "must be a chunk id '<document>:chunk:<n>'")
        return self

    @property
    def judged(self) -> bool:
        """Whether the query has any judgment yet: a new query (`rageval suite init`, then
        written by hand) starts with none, is pooled and graded, and is refused by the gate
        until it has some. An edge query needs none: nothing in the corpus answers it."""
        return self.query_type == "edge" or bool(self.judgments or self.spans)

    @property
    def grades(self) -> list[int]:
        return [s.grade for s in self.spans] or list(self.judgments.values())

    def _resolve(self, reference: Reference, at: tuple[str, int]) -> None:
        """Resolve every target to its canonical id, and place every span in the text as it is
        now (re-anchored when it moved); `at` is this query's place in the suite."""
        named_by: dict[str, str] = {}
        for target in self.judgments:
            loc = (*at, "judgments", target)
            try:
                resolved, _ = resolve_target(target, reference.chunk_counts, reference.mode)
            except TargetError as error:
                raise rule(loc, str(error)) from None
            if resolved in named_by:
                raise rule(loc, f"names {resolved!r}, already judged as {named_by[resolved]!r}")
            named_by[resolved] = target
            self._ids[target] = resolved
        placed = [
            reference.place(span, self.id, (*at, "spans", i)) for i, span in enumerate(self.spans)
        ]
        # Spans of one query may share a reference chunk (a judged region and the evidence
        # inside it), but not an excerpt: one excerpt has one grade.
        excerpts: dict[tuple[str, int, int], int] = {}
        for index, (resolved, evidence, _) in enumerate(placed):
            where = (evidence.doc_id, evidence.start, evidence.end)
            if where in excerpts:
                problem = f"repeats the excerpt of spans[{excerpts[where]}]: give it one grade"
                raise rule((*at, "spans", index), problem)
            excerpts[where] = index
            self._ids[str(index)] = resolved
        try:
            if self.top_1_chunk is not None:
                top = resolve_target(self.top_1_chunk, reference.chunk_counts, reference.mode)
                self._top_1_chunk_id = top[0]
        except TargetError as error:
            raise rule((*at, "top_1_chunk"), str(error)) from None
        if self.top_1_span is not None:
            placed_top = reference.place(self.top_1_span, self.id, (*at, "top_1_span"))
            self._top_1_chunk_id = placed_top[0]
            placed.append(placed_top)
        self._moves = [move for _, _, move in placed if move is not None]
        if self.spans:
            self._evidence = [evidence for _, evidence, _ in placed[: len(self.spans)]]
        elif self.level == "chunk":  # chunk-id judgments: their exact spans
            self._evidence = [reference.span_of(chunk) for chunk, _ in self.qrels]
        self._decisive = [self._decisive_part(reference, n, at) for n in range(len(self._evidence))]

    def _decisive_part(
        self, reference: Reference, index: int, at: tuple[str, int]
    ) -> tuple[int, int]:
        """The extent of span `index`'s decisive part (a chunk-id judgment's: its whole chunk)."""
        evidence = self._evidence[index]
        if not self.spans:
            return evidence.start, evidence.end
        span = self.spans[index]
        try:
            return span.decisive_part(reference.texts[evidence.doc_id], evidence)
        except QuoteError as error:
            where = f"query {self.id}, document {span.doc!r}, span {span.start}-{span.end}"
            raise rule((*at, "spans", index, "decisive"), f"{where}: {error}") from None

    @property
    def level(self) -> Level:
        """Chunk level when the targets are spans or chunk ids (all of them, by the rules), else
        document."""
        chunked = any(split_chunk_id(t) is not None for t in self.judgments)
        return "chunk" if chunked or self.spans else "document"

    @property
    def qrels(self) -> list[tuple[str, int]]:
        """(resolved id, grade) per judged target: each judgment in file order, or each
        reference chunk the spans judge with its derived grade (`core.suites.derived`: the
        highest grade of the spans it matches), in the order of the spans naming it."""
        if self.spans:
            return self._derived
        return [(self._ids[target], grade) for target, grade in self.judgments.items()]

    @property
    def written(self) -> list[str]:
        """How each of `qrels` is written in the file, for messages: the judgment's target, or
        the first span naming the chunk (`spans[2]`; the chunk id when it is only derived)."""
        first = {self.span_target(i): f"spans[{i}]" for i in reversed(range(len(self.spans)))}
        return [first.get(c, c) for c, _ in self._derived] if self.spans else list(self.judgments)

    def span_target(self, index: int) -> str:
        """The reference chunk span `index` names (its extent, else the one holding most of it)."""
        return self._ids[str(index)]

    @property
    def evidence(self) -> list[tuple[Evidence, int]]:
        """(span as it is now, grade) of each chunk-level judgment, in file order: the spans
        themselves, or the exact spans of judged reference chunks. Document-level judgments
        name no excerpt and have none."""
        if not self._evidence:
            return []
        return list(zip(self._evidence, self.grades, strict=True))

    @property
    def decisive(self) -> list[tuple[int, int]]:
        """[start, end) of each of `evidence`'s decisive part (core.suites.derived), in order."""
        return list(self._decisive)

    @property
    def primary_id(self) -> str | None:
        if self.spans:
            return next((self.span_target(i) for i, s in enumerate(self.spans) if s.primary), None)
        return self._ids[self.primary] if self.primary is not None else None

    @property
    def top_1_chunk_id(self) -> str | None:
        return self._top_1_chunk_id
