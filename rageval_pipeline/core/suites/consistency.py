"""Consistency of a suite's judgments: near-duplicate targets must carry the same grade.

Two targets of one query are near-duplicates when their normalised texts are equal, when the
Jaccard similarity of their word 3-shingles is at least `SHINGLE_AT` (0.8: the same text with
small edits), or when the Jaccard similarity of their word sets is at least `WORDS_AT` (0.55:
the same facts restated in the same vocabulary, as `api-reference:chunk:10` and
`rate-limiting:chunk:4` of techdocs, 0.60, which share few 3-shingles, 0.30). Normalising
lowercases the text and keeps only runs of letters and digits as words, so Markdown markup,
punctuation and spacing do not count. The next pair down in techdocs, `release-notes:chunk:5`
and `upgrade-guide:chunk:5` (0.52), is deliberately below the line: the upgrade guide adds
two facts (index generations, fusion replacing score mixing) that some queries ask about, so
their grades may differ. Texts that say different things stay under 0.40 in both suites. An
assessor who reads the same text twice for one query must give it one grade; a difference is a
judging slip, reported by `rageval validate` as an error. On templated pages two texts can
share their words and still say different things ("set headers" and "set cookies"): the suite's
`distinct` list names such a pair, with the reason, and its grades may then differ.
"""

from __future__ import annotations

import re
from itertools import combinations

from pydantic import BaseModel

from rageval_pipeline.core.io.chunk_ids import split_chunk_id
from rageval_pipeline.core.suites.chunking import split_text
from rageval_pipeline.core.suites.golden import Suite

SHINGLE_AT = 0.8
WORDS_AT = 0.55
SHINGLE = 3
_WORD = re.compile(r"[a-z0-9]+")


def target_text(suite: Suite, target_id: str) -> str:
    """The text an assessor reads for a resolved target: the reference chunk or the document."""
    texts = {d.id: d.text for d in suite.documents}
    parsed = split_chunk_id(target_id)
    if parsed is None:
        return texts[target_id]
    doc_id, index = parsed
    return split_text(texts[doc_id], suite.chunking)[index]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < SHINGLE:
        return {tuple(words)}
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def near_duplicate(a: str, b: str) -> str | None:
    """Why two texts are near-duplicates ("same text", "3-shingle Jaccard 0.85", "word
    Jaccard 0.60"), or None when they are not."""
    words_a, words_b = _words(a), _words(b)
    if words_a == words_b:
        return "same normalised text"
    shingles = _jaccard(_shingles(words_a), _shingles(words_b))
    if shingles >= SHINGLE_AT:
        return f"3-shingle Jaccard {shingles:.2f}"
    words = _jaccard(set(words_a), set(words_b))
    if words >= WORDS_AT:
        return f"word Jaccard {words:.2f}"
    return None


class Inconsistency(BaseModel):
    query_index: int
    query_id: str
    target: str  # as written in the file (a span: `spans[3]`)
    other: str
    target_id: str  # resolved: the section (reference chunk) or document it is
    other_id: str
    grade: int
    other_grade: int
    reason: str

    @property
    def field(self) -> str:
        if self.target.startswith("spans["):
            return f"queries[{self.query_index}].{self.target}"
        return f'queries[{self.query_index}].judgments["{self.target}"]'

    @property
    def problem(self) -> str:
        written = f"{self.other}, " if self.other != self.other_id else ""
        return (
            f"query {self.query_id}: {self.target_id} has grade {self.grade}, but its "
            f"near-duplicate {self.other_id} ({written}{self.reason}) has grade "
            f"{self.other_grade}; grade both from their content, or list the pair under "
            "`distinct` with the reason they differ"
        )


def inconsistencies(suite: Suite) -> list[Inconsistency]:
    """Every pair of near-duplicate targets of one query with different grades, file order."""
    found = []
    distinct = suite.distinct_pairs
    for index, query in enumerate(suite.queries):
        judged = [
            (target, resolved, grade)
            for target, (resolved, grade) in zip(query.written, query.qrels, strict=True)
        ]
        texts = {resolved: target_text(suite, resolved) for _, resolved, _ in judged}
        for (t1, r1, g1), (t2, r2, g2) in combinations(judged, 2):
            if g1 == g2 or frozenset((r1, r2)) in distinct:
                continue
            reason = near_duplicate(texts[r1], texts[r2])
            if reason is not None:
                found.append(
                    Inconsistency(
                        query_index=index,
                        query_id=query.id,
                        target=t2,
                        other=t1,
                        target_id=r2,
                        other_id=r1,
                        grade=g2,
                        other_grade=g1,
                        reason=reason,
                    )
                )
    return found
