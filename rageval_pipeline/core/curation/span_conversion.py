"""Rewriting a suite's chunk-id judgments as evidence spans (`rageval spans convert`), and a
suite of format 1.0 as one of nuggets, 1.1 (`rageval spans nuggets`).

Each chunk-id judgment becomes the exact span of its chunk under the suite's reference
chunking (the chunk's character extent in the document, `core.suites.spans.chunk_extents`), so the
chunk-level qrels the converted suite gives under the reference chunking are the ones it gave
before, and its judgments survive re-chunking and edits. `top_1_chunk` becomes `top_1_span`
the same way; spans whose text moved get the offsets where it is now. Document-level judgments
name no excerpt and stay as they are.

Format 1.1 reads each span's grade as its own (a nugget's). A 1.0 suite's evidence spans carry
their target's grade, so the version is bumped with every grade as it was: the chunk grades it
derives are unchanged until the nuggets are re-judged one by one (docs/suite-format.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from rageval_pipeline.core.curation.rewrite import rewrite_suite
from rageval_pipeline.core.suites.evidence import span_entry
from rageval_pipeline.core.suites.golden import FORMAT_VERSION, Suite, load_suite


class Conversion(NamedTuple):
    queries: int  # queries whose chunk-id judgments became spans
    spans: int  # spans written for them
    top_1: int  # top_1_chunk fields that became top_1_span
    moved: int  # spans re-anchored where their text is now

    def describe(self) -> str:
        return (
            f"{self.queries} queries' chunk-id judgments to {self.spans} spans, {self.top_1} "
            f"top_1_chunk to top_1_span, {self.moved} moved spans re-anchored"
        )


def _rename(raw: dict[str, Any], old: str, new: str, value: Any) -> None:
    """Replace key `old` by `new` with `value` in place, keeping its position in the file."""
    items = [(new, value) if key == old else (key, v) for key, v in raw.items()]
    raw.clear()
    raw.update(items)


def convert_queries(suite: Suite, raw_queries: dict[str, dict[str, Any]]) -> Conversion:
    """Rewrite the raw queries (by id, as in the file) of `suite` in place."""
    reference = suite.reference
    queries = spans = top_1 = 0
    for query in suite.queries:
        raw = raw_queries[query.id]
        if query.judgments and query.level == "chunk":
            written = []
            for (target, grade), (chunk, _) in zip(
                query.judgments.items(), query.qrels, strict=True
            ):
                primary = {"primary": True} if target == query.primary else {}
                written.append(span_entry(reference.span_of(chunk), grade=grade, **primary))
            raw.pop("primary", None)
            _rename(raw, "judgments", "spans", written)
            queries, spans = queries + 1, spans + len(written)
        if query.top_1_chunk is not None and query.top_1_chunk_id is not None:
            top = span_entry(reference.span_of(query.top_1_chunk_id))
            _rename(raw, "top_1_chunk", "top_1_span", top)
            top_1 += 1
    for move in suite.moves:
        _, index, *path = move.loc
        place = raw_queries[suite.queries[int(index)].id]
        for key in path:
            place = place[key]
        place["start"], place["end"] = move.after
    return Conversion(queries, spans, top_1, len(suite.moves))


def _pending(suite: Suite) -> bool:
    chunk_ids = any(q.judgments and q.level == "chunk" for q in suite.queries)
    return chunk_ids or bool(suite.moves) or any(q.top_1_chunk for q in suite.queries)


def convert_suite(suite_file: Path) -> Conversion:
    """Convert the suite file in place (validated before it is replaced; see
    `rewrite.rewrite_suite`); nothing is written when there is nothing to convert."""
    suite = load_suite(suite_file)
    if not _pending(suite):
        return Conversion(0, 0, 0, 0)
    found: list[Conversion] = []
    rewrite_suite(suite_file, lambda raw_queries: found.append(convert_queries(suite, raw_queries)))
    return found[0]


def to_nuggets(suite_file: Path) -> int | None:
    """Bump a suite of format 1.0 to 1.1 in place, every span keeping its grade (validated
    before it is replaced); the number of spans graded >= 1, now nuggets to re-judge, or None
    when the suite is at the current version already."""
    suite = load_suite(suite_file)
    if suite.version == FORMAT_VERSION:
        return None
    rewrite_suite(suite_file, lambda _: None, version=FORMAT_VERSION)
    return sum(span.grade >= 1 for query in suite.queries for span in query.spans)
