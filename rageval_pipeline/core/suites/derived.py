"""Evidence spans against any chunking: tokens, and the chunk grades derived from nuggets.

A token is a whitespace token of a document's text: a maximal run of non-whitespace
characters (`\\S+`, the tokens of `str.split()`), identified by its position in the document.
An extent (a chunk's or a span's `start`..`end`, characters, end exclusive) holds the tokens it
shares at least one character with, so a boundary that cuts a word keeps the word on both sides.
Counting tokens rather than characters keeps the numbers independent of whitespace and
formatting, and judges of a suite can count them by hand.

A query's spans are its judged regions (grade 0: text the judge read and found no answer in)
and its nuggets (grade >= 1: one fact each, graded by how much of the answer it carries). Each
nugget has a *decisive part*: the words that carry the answer, written as the span's
`decisive` quote, else the whole nugget (docs/suite-format.md). The derivation rule:

- a chunk sharing a token with any span of a query is judged for that query; text no span
  covers is unjudged, so an answer the judge did not read is never an explicit 0;
- it earns a nugget's grade when it holds at least half (`DECISIVE`) of the tokens of the
  nugget's decisive part; a grade is never earned for the rest of a nugget, so a fragment of a
  few tokens earns nothing unless they are the decisive words, and a nugget cut by a chunk
  boundary goes to the side holding (most of) its decisive words, to both when they hold
  exactly half each or overlap holds them all;
- its grade is the highest it earns, else 0.

So a chunk holding a whole grade-g nugget earns at least g, a chunk holding no decisive token
earns 0, and moving a chunk boundary by one token changes a grade only when the token is
decisive (tests/test_nugget_grades.py). Under a reference chunking whose chunks share no
token, a chunk holding its nuggets whole earns the highest of their grades: its judged grade
(`reference_grades`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from rageval_pipeline.core.io.chunk_ids import chunk_id
from rageval_pipeline.core.suites.chunking import TOKEN, ChunkingConfig, chunk_once
from rageval_pipeline.core.suites.passages import passage_units

# The share of a nugget's decisive tokens a chunk must hold to earn its grade: at least half,
# so a decisive part cut in two goes to the side holding more of it (to both at an even cut).
DECISIVE = 0.5


@dataclass(frozen=True)
class Tokens:
    """The whitespace tokens of every document: character starts and ends, by document id."""

    starts: dict[str, np.ndarray]
    ends: dict[str, np.ndarray]

    @classmethod
    def of(cls, corpus: pd.DataFrame) -> Tokens:
        starts, ends = {}, {}
        for doc_id, text in zip(corpus["doc_id"], corpus["text"], strict=True):
            found = [m.span() for m in TOKEN.finditer(text if isinstance(text, str) else "")]
            bounds = np.array(found, dtype=np.int64).reshape(-1, 2)
            starts[doc_id], ends[doc_id] = bounds[:, 0], bounds[:, 1]
        return cls(starts, ends)

    def ranges(self, extents: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(first, stop): the token positions [first, stop) each row's doc_id/start/end holds;
        an unknown document holds none."""
        first = np.zeros(len(extents), dtype=np.int64)
        stop = np.zeros(len(extents), dtype=np.int64)
        rows = extents[["doc_id", "start", "end"]].reset_index(drop=True)
        for doc_id, group in rows.groupby("doc_id", sort=False):
            if doc_id not in self.starts:
                continue
            index = group.index.to_numpy()
            # Tokens ending after the extent starts and starting before it ends.
            first[index] = np.searchsorted(self.ends[doc_id], group["start"], side="right")
            stop[index] = np.searchsorted(self.starts[doc_id], group["end"], side="left")
        return first, np.maximum(first, stop)


def decisive_extents(spans: pd.DataFrame) -> pd.DataFrame:
    """doc_id, start, end of each span's decisive part: its `decisive_start`..`decisive_end`
    when the table has them (SPANS does), else the whole span."""
    start = spans["decisive_start"] if "decisive_start" in spans else spans["start"]
    end = spans["decisive_end"] if "decisive_end" in spans else spans["end"]
    return pd.DataFrame({"doc_id": spans["doc_id"], "start": start, "end": end})


def derive_qrels(spans: pd.DataFrame, units: pd.DataFrame, tokens: Tokens) -> pd.DataFrame:
    """Chunk-level QRELS for `units` (id, doc_id, start, end: the chunks of any chunking) from
    judged SPANS, by the module's rule: every chunk sharing a token with a query's span is
    judged for that query, and earns the grade of each nugget whose decisive part it holds at
    least half of."""
    span_first, span_stop = tokens.ranges(spans)
    key_first, key_stop = tokens.ranges(decisive_extents(spans))
    chunk_first, chunk_stop = tokens.ranges(units)
    left = spans.assign(s_first=span_first, s_stop=span_stop, k_first=key_first, k_stop=key_stop)[
        ["split", "query_id", "doc_id", "relevance", "s_first", "s_stop", "k_first", "k_stop"]
    ]
    right = units.assign(c_first=chunk_first, c_stop=chunk_stop)[
        ["id", "doc_id", "c_first", "c_stop"]
    ]
    pairs = left.merge(right, on="doc_id")
    shared = np.minimum(pairs["s_stop"], pairs["c_stop"]) - np.maximum(
        pairs["s_first"], pairs["c_first"]
    )
    pairs = pairs[shared > 0]
    decisive = (pairs["k_stop"] - pairs["k_first"]).to_numpy()
    held = np.minimum(pairs["k_stop"], pairs["c_stop"]) - np.maximum(
        pairs["k_first"], pairs["c_first"]
    )
    earned = (held.to_numpy() > 0) & (held.to_numpy() >= DECISIVE * decisive)
    pairs = pairs.assign(relevance=pairs["relevance"].where(earned, 0))
    keys = ["split", "query_id", "id"]
    graded = pairs.groupby(keys, as_index=False, sort=True)["relevance"].max()
    return pd.DataFrame(
        {
            "split": graded["split"].astype(str),
            "query_id": graded["query_id"].astype(str),
            "doc_id": graded["id"].astype(str),
            "relevance": graded["relevance"].astype("int32"),
            "level": "chunk",
        }
    )


def reference_grades(
    evidence: Mapping[str, list[tuple[str, int, int, int, int, int]]],
    extents: Mapping[str, list[tuple[int, int]]],
    texts: Mapping[str, str],
) -> dict[str, dict[str, int]]:
    """Query -> reference chunk id -> derived grade, from each query's spans (document,
    start, end, grade, and the start and end of its decisive part) and the reference
    chunking's extents per document (chunk n of `doc` is `doc:chunk:n`): the module's rule, as
    for any chunking."""
    columns = ["query_id", "doc_id", "start", "end", "relevance", "decisive_start", "decisive_end"]
    spans = pd.DataFrame(
        [(query, *span) for query, spans in evidence.items() for span in spans], columns=columns
    ).assign(split="test")
    units = pd.DataFrame(
        [
            (chunk_id(doc, n), doc, start, end)
            for doc, bounds in extents.items()
            for n, (start, end) in enumerate(bounds)
        ],
        columns=["id", "doc_id", "start", "end"],
    )
    corpus = pd.DataFrame({"doc_id": list(texts), "text": list(texts.values())})
    derived = derive_qrels(spans, units, Tokens.of(corpus))
    order = {chunk: n for n, chunk in enumerate(units["id"])}
    derived = derived.iloc[np.argsort(derived["doc_id"].map(order).to_numpy(), kind="stable")]
    grades: dict[str, dict[str, int]] = {}
    for query, chunk, grade in derived[["query_id", "doc_id", "relevance"]].itertuples(index=False):
        grades.setdefault(query, {})[chunk] = int(grade)
    return grades


@dataclass(frozen=True)
class EvidenceSet:
    """What a run is judged against when its suite has evidence spans."""

    spans: pd.DataFrame  # SPANS of the evaluated split
    tokens: Tokens
    units: pd.DataFrame  # id, doc_id, start, end of every id the run can retrieve
    chunked: bool  # the ids are chunks (judged by derived qrels), not whole documents

    @classmethod
    def of(
        cls, spans: pd.DataFrame, corpus: pd.DataFrame, chunks: pd.DataFrame | None
    ) -> EvidenceSet:
        """`chunks`: the CHUNKS table of the run's chunking; None when it retrieves documents."""
        if chunks is None:
            lengths = corpus["text"].fillna("").astype(str).str.len()
            units = pd.DataFrame(
                {"id": corpus["doc_id"], "doc_id": corpus["doc_id"], "start": 0, "end": lengths}
            )
        else:
            units = chunks[["chunk_id", "doc_id", "start", "end"]].rename(
                columns={"chunk_id": "id"}
            )
        return cls(spans, Tokens.of(corpus), units, chunks is not None)

    @classmethod
    def for_ids(
        cls,
        spans: pd.DataFrame,
        corpus: pd.DataFrame,
        reference: ChunkingConfig | None,
        run: pd.DataFrame,
    ) -> EvidenceSet:
        """For a run of any ids (`rageval eval --suite`): whole documents, the suite's
        reference chunks and passages each hold their own extent."""
        whole = cls.of(spans, corpus, None)
        units = whole.units
        if reference is not None:
            chunks = chunk_once(corpus, reference)[["chunk_id", "doc_id", "start", "end"]]
            units = pd.concat([chunks.rename(columns={"chunk_id": "id"}), units], ignore_index=True)
        return replace(whole, units=units).with_passages(run)

    def with_passages(self, run: pd.DataFrame) -> EvidenceSet:
        """With the passages an outside system returned (`passages`: ids carrying their
        extents) as its units, judged by derived grades as a chunking's chunks are (in place of
        whole documents). Only retrieved passages are known, so the qrels measures' ideal
        lists hold those alone; the span and budget measures need no ideal list."""
        found = passage_units(run["doc_id"])
        if found.empty:
            return self
        units = pd.concat([self.units, found], ignore_index=True) if self.chunked else found
        return replace(self, units=units, chunked=True)

    def qrels(self) -> pd.DataFrame:
        """The chunk-level QRELS its spans derive for its units: what a run of them is judged
        by in the pipeline, and what `rageval qrels` writes."""
        return derive_qrels(self.spans, self.units, self.tokens)


def suite_evidence(
    spans: pd.DataFrame, corpus: pd.DataFrame, chunks: Callable[[], pd.DataFrame | None]
) -> EvidenceSet | None:
    """The evidence a run on a golden suite is judged against: the suite's SPANS of the
    evaluated split (`loaders.load_part(folder, "spans")`); None when it has none (BEIR,
    document-level suites). `chunks`: the corpus chunked as the run returns it (None: it
    returns documents), asked for only when there are spans."""
    if spans.empty:
        return None
    return EvidenceSet.of(spans, corpus, chunks())
