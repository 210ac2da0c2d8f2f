"""Evidence spans in a golden suite: the span models of the suite file, and a suite's documents
under its reference chunking (where a judged span is now, which reference chunk is exactly
that span, the exact span of a reference chunk). Text functions are in `core.suites.spans`; the
format is described in docs/suite-format.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NamedTuple

from pydantic import Field, model_validator

from rageval_pipeline.core.io.chunk_ids import chunk_id, split_chunk_id
from rageval_pipeline.core.io.config import rule
from rageval_pipeline.core.io.field_paths import Loc, render
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.suites.derived import reference_grades
from rageval_pipeline.core.suites.fields import Grade, Id, StrictModel
from rageval_pipeline.core.suites.matching import MatchMode, TargetError, resolve
from rageval_pipeline.core.suites.spans import (
    Drift,
    anchor,
    chunk_extents,
    locate_quote,
    span_sha256,
)

Sha256 = Annotated[
    str,
    Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 hex of the span's text in UTF-8"),
]


class Span(StrictModel):
    """An excerpt of one document: its characters [start, end) and the hash of their text."""

    doc: Id = Field(description="document id (matched like a judgment target)")
    start: int = Field(ge=0, description="offset of the first character, from 0")
    end: int = Field(description="offset one past the last character")
    sha256: Sha256

    @model_validator(mode="after")
    def _not_empty(self) -> Span:
        if self.end <= self.start:
            raise rule(("end",), f"must be greater than start ({self.start})")
        return self


class SpanJudgment(Span):
    """A graded span of a query: a judged region (grade 0) or a nugget (grade >= 1), graded by
    how much of the answer it carries."""

    grade: Grade
    primary: bool = Field(False, description="the query's primary evidence (highest grade)")
    decisive: str | None = Field(
        None,
        min_length=1,
        description="a nugget's decisive words, quoted from its text (default: the whole span)",
    )

    @model_validator(mode="after")
    def _decisive_on_nuggets(self) -> SpanJudgment:
        if self.decisive is not None and self.grade == 0:
            raise rule(("decisive",), "a judged region (grade 0) has no decisive part")
        return self

    def decisive_part(self, text: str, evidence: Evidence) -> tuple[int, int]:
        """[start, end) of the decisive part in the document `text` where the span is now:
        its `decisive` quote located inside the span, else the whole span. QuoteError when the
        quote is not in the span's text or is there more than once."""
        if self.decisive is None:
            return evidence.start, evidence.end
        return locate_quote(text, self.decisive, evidence.start, evidence.end)


def check_primary(spans: Sequence[SpanJudgment], primary: str | None, best: int) -> None:
    """A query's spans name their primary evidence with `primary: true` on one span of the
    highest grade (when one has grade >= 1), not with the query's `primary` field."""
    if primary is not None:
        raise rule(("primary",), "must be absent with spans: mark the span `primary: true`")
    marked = [i for i, span in enumerate(spans) if span.primary]
    if best == 0 and marked:
        raise rule(("spans", marked[0], "primary"), "no span has grade >= 1")
    if best >= 1 and len(marked) != 1:
        raise rule(("spans",), f"{len(marked)} spans are marked primary: mark exactly one")
    if marked and spans[marked[0]].grade != best:
        problem = f"marks a span of grade {spans[marked[0]].grade}, the highest is {best}"
        raise rule(("spans", marked[0], "primary"), problem)


class Evidence(NamedTuple):
    """A span placed in the suite: the document's canonical id and the offsets of its text now."""

    doc_id: str
    start: int
    end: int
    sha256: str


def span_entry(evidence: Evidence, **fields: Any) -> dict[str, Any]:
    """A span as the suite file writes it: doc, start, end, then `fields`, then sha256."""
    doc, start, end, sha256 = evidence
    return {"doc": doc, "start": start, "end": end, **fields, "sha256": sha256}


class Move(NamedTuple):
    """A judged span whose text was found at other offsets, and re-anchored there."""

    loc: Loc  # where the span is written: ("queries", 3, "spans", 2)
    query_id: str
    doc_id: str
    before: tuple[int, int]
    after: tuple[int, int]

    def describe(self) -> str:
        (a, b), (c, d) = self.before, self.after
        return (
            f"{render(self.loc)}: query {self.query_id}, document {self.doc_id!r}, span {a}-{b} "
            f"moved to {c}-{d}"
        )


class Reference:
    """A suite's documents under its reference chunking."""

    def __init__(self, texts: Mapping[str, str], chunking: ChunkingConfig, mode: MatchMode):
        self.texts, self.chunking, self.mode = dict(texts), chunking, mode
        self.extents = {doc: chunk_extents(text, chunking) for doc, text in self.texts.items()}
        self.chunk_counts = {doc: len(extents) for doc, extents in self.extents.items()}
        self._chunk_at = {
            (doc, start, end): chunk_id(doc, n)
            for doc, extents in self.extents.items()
            for n, (start, end) in enumerate(extents)
        }

    def locate(self, span: Span) -> tuple[Evidence, bool]:
        """The span where its judged text is now, and whether it moved there. TargetError for
        an unknown document, `spans.Drift` for text that changed or is ambiguous."""
        doc_id = resolve(span.doc, self.texts.keys(), self.mode)
        placed = anchor(self.texts[doc_id], span.start, span.end, span.sha256)
        return Evidence(doc_id, placed.start, placed.end, span.sha256), placed.moved

    def place(self, span: Span, query_id: str, loc: Loc) -> tuple[str, Evidence, Move | None]:
        """(reference chunk, evidence, move or None) of a query's span at `loc` in the suite;
        a span that names no document, whose text changed or is no reference chunk is refused
        naming query, document and span."""
        try:
            evidence, moved = self.locate(span)
            blank = not self.texts[evidence.doc_id][evidence.start : evidence.end].strip()
            if blank and getattr(span, "grade", 1) >= 1:  # a top_1_span is evidence too
                raise Drift("the judged text is only whitespace: no evidence for a grade >= 1")
            chunk = self.chunk_of(evidence)
        except (TargetError, Drift) as error:
            where = f"query {query_id}, document {span.doc!r}, span {span.start}-{span.end}"
            raise rule(loc, f"{where}: {error}") from None
        after = (evidence.start, evidence.end)
        move = Move(loc, query_id, evidence.doc_id, (span.start, span.end), after)
        return chunk, evidence, move if moved else None

    def chunk_of(self, evidence: Evidence) -> str:
        """The reference chunk a span's grade goes to: the chunk whose extent it is exactly,
        else the one holding most of its characters (the first of equals), so that an edit in
        the span's own chunk but outside the span keeps its judgment on that chunk."""
        doc_id, start, end, _ = evidence
        if (found := self._chunk_at.get((doc_id, start, end))) is not None:
            return found
        shared = [min(end, e) - max(start, s) for s, e in self.extents[doc_id]]
        if max(shared, default=0) <= 0:
            raise TargetError(f"span {start}-{end} of {doc_id!r} lies in no chunk (only spaces)")
        return chunk_id(doc_id, shared.index(max(shared)))

    def derived(
        self, spans: Mapping[str, Sequence[tuple[Evidence, int, str, tuple[int, int]]]]
    ) -> dict[str, list[tuple[str, int]]]:
        """Query -> (reference chunk, grade) of every chunk its spans (evidence, grade, the
        chunk it names, the extent of its decisive part) judge, graded by the one rule that
        derives chunk grades from nuggets for any chunking (`core.suites.derived`), in the order
        of the spans naming them, then in reference order. Under sections (chunks sharing no
        token) a chunk's grade is that of the nuggets inside it, the judged grade."""
        if not spans:
            return {}
        evidence = {
            q: [(*e[:3], grade, *key) for e, grade, _, key in rows] for q, rows in spans.items()
        }
        grades = reference_grades(evidence, self.extents, self.texts)
        out = {}
        for query, rows in spans.items():
            named: dict[str, int] = {}
            for _, _, chunk, _ in rows:
                named.setdefault(chunk, len(named))
            mine = grades.get(query, {})
            out[query] = sorted(mine.items(), key=lambda item: named.get(item[0], len(named)))
        return out

    def extent_of(self, target: str) -> Evidence:
        """The text a resolved target names: a reference chunk's exact span, or a whole
        document's text without its surrounding whitespace (an entity judged as a whole)."""
        if split_chunk_id(target) is not None:
            return self.span_of(target)
        if target not in self.texts:
            raise TargetError(f"{target!r} is not a document of this suite")
        text = self.texts[target]
        start, end = len(text) - len(text.lstrip()), len(text.rstrip())
        return Evidence(target, start, end, span_sha256(text, start, end))

    def span_of(self, chunk: str) -> Evidence:
        """The exact span of a resolved reference chunk id (`doc:chunk:n`)."""
        parts = split_chunk_id(chunk)
        if parts is None or parts[0] not in self.extents:
            raise TargetError(f"{chunk!r} is not a chunk of this suite")
        doc_id, index = parts
        start, end = self.extents[doc_id][index]
        return Evidence(doc_id, start, end, span_sha256(self.texts[doc_id], start, end))
