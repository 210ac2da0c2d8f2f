"""Passages an outside system returns, made units that evidence spans judge.

A team's own chunker returns no suite chunk id: its results carry the passage text
(`{"id", "score", "text"}`) or its character offsets (`{"doc_id", "start", "end"}`, end
exclusive). Each is located in the corpus and named by a passage id `{doc_id}:span:{start}-{end}`
that carries its extent, so a run needs no other column: the span and budget measures and the
derived chunk grades (`derived`) judge it like a built-in chunking's chunks. A run file may use
the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pandas as pd

from rageval_pipeline.core.suites.spans import loose_pattern

# `{doc_id}:span:{start}-{end}`: the one place the passage-id format is written and read.
_PASSAGE_ID = re.compile(r"^(?P<doc>.+):span:(?P<start>\d+)-(?P<end>\d+)$")


def passage_id(doc_id: str, start: int, end: int) -> str:
    return f"{doc_id}:span:{start}-{end}"


def split_passage_id(value: str) -> tuple[str, int, int] | None:
    """`(doc_id, start, end)` of a passage id, None for anything else."""
    found = _PASSAGE_ID.match(value)
    return None if found is None else (found["doc"], int(found["start"]), int(found["end"]))


def is_passage_id(ids: pd.Series) -> pd.Series:
    """Whether each id has the passage-id form `doc_id:span:start-end`."""
    return ids.astype(str).str.match(_PASSAGE_ID)


def passage_units(ids: pd.Series) -> pd.DataFrame:
    """id, doc_id, start, end of every distinct passage id among `ids` (others left out)."""
    found = pd.Series(ids.dropna().astype(str).unique()).str.extract(_PASSAGE_ID)
    found = found.assign(id=pd.Series(ids.dropna().astype(str).unique())).dropna()
    return pd.DataFrame(
        {
            "id": found["id"].astype(str),
            "doc_id": found["doc"].astype(str),
            "start": found["start"].astype("int64"),
            "end": found["end"].astype("int64"),
        }
    ).reset_index(drop=True)


class Locator:
    """Finds a passage's text in the corpus: verbatim first, else with any run of whitespace
    matching any other (chunkers strip and re-join whitespace); in its document when the result
    names one, else in the first document, in corpus order, that holds it."""

    def __init__(self, corpus: pd.DataFrame) -> None:
        texts = corpus["text"].fillna("").astype(str)
        self.texts = dict(zip(corpus["doc_id"].astype(str), texts, strict=True))

    def _candidates(self, doc_id: str | None) -> Iterator[tuple[str, str]]:
        if doc_id is not None:
            if doc_id in self.texts:
                yield doc_id, self.texts[doc_id]
            return
        yield from self.texts.items()

    def locate(self, text: str, doc_id: str | None = None) -> tuple[str, int, int] | None:
        """(doc_id, start, end) of `text`, None when no document holds it."""
        words = text.split()
        if not words:
            return None
        loose = loose_pattern(words)
        for doc, body in self._candidates(doc_id):
            at = body.find(text)
            if at >= 0:
                return doc, at, at + len(text)
            found = loose.search(body)
            if found is not None:
                return doc, found.start(), found.end()
        return None

    def extent(self, doc_id: str, start: int, end: int) -> str | None:
        """Why offsets name no passage of the corpus (None when they do)."""
        if doc_id not in self.texts:
            return f"document {doc_id!r} is not in the corpus"
        if not 0 <= start < end <= len(self.texts[doc_id]):
            return (
                f"{start}..{end} is not a passage of {doc_id!r} ({len(self.texts[doc_id])} chars)"
            )
        return None
