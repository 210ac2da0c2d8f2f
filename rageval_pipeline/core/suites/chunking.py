"""Chunking strategies: turn a corpus table into a chunk table with stable ids and hashes.

Strategies (`ChunkingConfig.strategy`):
- `document`: one chunk per document (title is kept in its own column, not in the text).
- `fixed`: windows of `size` whitespace tokens, consecutive windows sharing `overlap` tokens;
  the last window ends at the last token. Whitespace tokens keep the rule model-agnostic and
  reproducible by hand (assessors of a suite can count them).
- `paragraph`: split on blank lines.
- `markdown_headers`: a new chunk starts at every line `#`..`######` followed by a space that
  is not inside a ``` fence; text before the first header is a chunk of its own.
- `token`, `sentence`, `recursive`: chonkie's TokenChunker (windows of `size` words sharing
  `overlap`), SentenceChunker (whole sentences up to `size` words, `overlap` words carried over)
  and RecursiveChunker (paragraphs, then sentences, then words, up to `size` words), all with
  chonkie's built-in `word` tokenizer, so nothing is downloaded (`core.suites.chunk_library`).
- `reference`: the dataset's own reference chunking (a golden suite's, under which its
  chunk-level judgments are numbered), or `document` for datasets without one (BEIR). Resolve
  it with `ChunkingConfig.resolve` before splitting.

Every strategy drops chunks that are empty after stripping, numbers the rest from 0
(`chunk_index`) and names them `{doc_id}:chunk:{chunk_index}`, so ids are stable as long as the
document and the configuration are. Each chunk also records its extent in the document text
(`start`, `end`: character offsets, end exclusive), what evidence spans are matched against
(`core.suites.derived`).

`chunk_once` is how every reader outside the pipeline's `<system>/chunks` asset gets chunks:
each corpus is chunked once per process under each chunking (the Dagster layer reads the stored
chunks first: `defs/assets/chunked.py`).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Literal, NamedTuple

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.chunk_ids import chunk_id

Strategy = Literal[
    "document",
    "fixed",
    "paragraph",
    "markdown_headers",
    "token",
    "sentence",
    "recursive",
    "reference",
]
# Strategies whose `overlap` is shared by consecutive windows.
_OVERLAPPING = ("fixed", "token", "sentence")
# The largest `size`: far above any useful chunk (a window of a million words is a whole
# book), and below what chonkie's sentence and recursive chunkers convert to a C integer
# (10**30 raised OverflowError in them after passing `rageval validate`).
MAX_SIZE = 1_000_000

_HEADER = re.compile(r"^#{1,6} ")
_FENCE = re.compile(r"^\s*```")
_BLANK_LINES = re.compile(r"\n\s*\n")
# A whitespace token: what `str.split()` returns, with its place in the text.
TOKEN = re.compile(r"\S+")


class ChunkingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = "document"
    size: int = Field(
        256,
        gt=0,
        le=MAX_SIZE,
        description="chunk size in tokens (fixed, token, sentence, recursive)",
    )
    overlap: int = Field(32, ge=0, description="tokens shared by consecutive windows")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.strategy in _OVERLAPPING and self.overlap >= self.size:
            if "overlap" not in self.model_fields_set:  # say where the overlap comes from
                raise ValueError(
                    f"size {self.size} is not above the default overlap ({self.overlap}): "
                    f"set `overlap` below {self.size} too"
                )
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        if self.strategy == "recursive" and "overlap" in self.model_fields_set and self.overlap:
            raise ValueError("`recursive` chunking takes no overlap: remove `overlap`")
        return self

    def resolve(self, reference: ChunkingConfig | None) -> ChunkingConfig:
        """The concrete chunking for a dataset whose reference chunking is `reference`."""
        if self.strategy != "reference":
            return self
        return reference or ChunkingConfig()


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Piece(NamedTuple):
    """One chunk of a document: its text and the extent it was cut from, as character offsets
    into the document text (`end` exclusive). The text is the extent stripped, except that fixed
    windows join their tokens with one space and markdown sections their lines with "\\n"."""

    text: str
    start: int
    end: int


def split_text(text: str, config: ChunkingConfig) -> list[str]:
    """The chunk texts of one document, in order, empty ones dropped."""
    return [piece.text for piece in split_pieces(text, config)]


def split_pieces(text: str, config: ChunkingConfig) -> list[Piece]:
    """The chunks of one document with their extents, in order, empty ones dropped."""
    match config.strategy:
        case "document":
            raw = [(0, len(text))]
            parts = [text]
        case "fixed":
            return _windows(text, config.size, config.overlap)
        case "paragraph":
            raw = _between(text, _BLANK_LINES)
            parts = [text[a:b] for a, b in raw]
        case "markdown_headers":
            raw, parts = _markdown_sections(text)
        case "reference":
            raise ValueError("resolve the `reference` chunking for a dataset before splitting")
        case "token" | "sentence" | "recursive":
            from rageval_pipeline.core.suites.chunk_library import library_extents  # chonkie: 0.2 s

            raw = library_extents(text, config.strategy, config.size, config.overlap)
            parts = [text[a:b] for a, b in raw]
    return [
        _stripped(text, part, a, b) for part, (a, b) in zip(parts, raw, strict=True) if part.strip()
    ]


def _stripped(text: str, part: str, start: int, end: int) -> Piece:
    """`part` stripped, with the extent `text[start:end]` it came from stripped the same way."""
    extent = text[start:end]
    start += len(extent) - len(extent.lstrip())
    end -= len(extent) - len(extent.rstrip())
    return Piece(part.strip(), start, end)


def _between(text: str, separator: re.Pattern[str]) -> list[tuple[int, int]]:
    """The extents of `text` between the matches of `separator` (as `separator.split`)."""
    extents, cursor = [], 0
    for found in separator.finditer(text):
        extents.append((cursor, found.start()))
        cursor = found.end()
    return [*extents, (cursor, len(text))]


def _windows(text: str, size: int, overlap: int) -> list[Piece]:
    """Windows of `size` whitespace tokens (`\\S+`, the tokens of `str.split`)."""
    tokens = list(TOKEN.finditer(text))
    step = size - overlap
    out = []
    for start in range(0, len(tokens), step):
        window = tokens[start : start + size]
        joined = " ".join(token.group() for token in window)
        out.append(Piece(joined, window[0].start(), window[-1].end()))
        if start + size >= len(tokens):
            break
    return out


def _marked_lines(text: str) -> Iterator[tuple[str, int, bool]]:
    """Each line of a Markdown text, its length with its line end, and whether it is a header
    (`#`..`######` and a space, outside a ``` fence): the one reading of headers that sections
    (`markdown_headers`) and titles (`markdown_headers_of`) share."""
    in_fence = False
    # Both splittings cut at the same line boundaries; keepends gives each line's length.
    for line, kept in zip(text.splitlines(), text.splitlines(keepends=True), strict=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        yield line, len(kept), not in_fence and _HEADER.match(line) is not None


def markdown_headers_of(text: str) -> list[str]:
    """The header lines of a Markdown text, in order, fenced code left out."""
    return [line for line, _, header in _marked_lines(text) if header]


def _markdown_sections(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """(extents, texts) of the header sections; a text joins its lines with "\\n"."""
    sections: list[list[str]] = [[]]
    extents = [[0, 0]]
    cursor = 0
    for line, length, header in _marked_lines(text):
        if header:
            sections.append([])
            extents.append([cursor, cursor])
        sections[-1].append(line)
        extents[-1][1] = cursor + len(line)
        cursor += length
    return [(a, b) for a, b in extents], ["\n".join(s) for s in sections]


def _str(value: object) -> str:
    """Missing strings arrive as None or NaN from pandas; both mean empty here."""
    return value if isinstance(value, str) else ""


def chunk_corpus(corpus: pd.DataFrame, config: ChunkingConfig, ingested_at: str) -> pd.DataFrame:
    """A CHUNKS table for every document of a CORPUS table, in corpus order."""
    rows = []
    for doc in corpus.itertuples(index=False):
        for index, piece in enumerate(split_pieces(_str(doc.text), config)):
            rows.append(
                dict(
                    chunk_id=chunk_id(doc.doc_id, index),
                    doc_id=doc.doc_id,
                    chunk_index=index,
                    title=_str(doc.title),
                    url=_str(doc.url),
                    text=piece.text,
                    content_hash=content_hash(piece.text),
                    ingested_at=ingested_at,
                    start=piece.start,
                    end=piece.end,
                )
            )
    if not rows:
        return tables.empty(tables.CHUNKS)
    return tables.conform(pd.DataFrame.from_records(rows), tables.CHUNKS).to_pandas()


# The corpus chunked by a chunking, as a caller has it stored (the pipeline's `<system>/chunks`):
# what a reader of chunks (`chunks_of`) takes in place of chunking the corpus itself.
StoredChunks = Callable[[ChunkingConfig], pd.DataFrame]

# The corpus chunked in this process, by (what chunking reads of the corpus, chunking), the
# most recently used last: a step or command asked for the same chunks at several sites (an
# outside run's ids, evidence spans, qrels coverage, a reranker's texts), chunking each time.
_CHUNKED: OrderedDict[tuple[str, ChunkingConfig], pd.DataFrame] = OrderedDict()
KEPT_CHUNKINGS = 8  # a few corpora under a few chunkings
# Rows kept in all (about 1 GB of chunk text at 500 bytes a row): a long-lived worker does not
# hold a large corpus's chunks after the step that asked for them; a larger table is not kept.
KEPT_ROWS = 2_000_000


def _read_by_chunking(corpus: pd.DataFrame) -> str:
    """A digest of the columns chunking reads, row by row (0.02 s for 4,000 documents of 250
    words, against 0.06 s to chunk them whole and 0.4 s into windows or sentences)."""
    rows = pd.util.hash_pandas_object(corpus[["doc_id", "title", "url", "text"]], index=False)
    return hashlib.sha256(rows.to_numpy().tobytes()).hexdigest()


def chunk_once(corpus: pd.DataFrame, config: ChunkingConfig) -> pd.DataFrame:
    """`chunk_corpus(corpus, config, "")`, chunked once per process for the same documents
    (their ids, titles, urls and texts) and chunking, unless the table is over `KEPT_ROWS`.
    The table returned is shared: read it, never change it."""
    key = (_read_by_chunking(corpus), config)
    chunks = _CHUNKED.pop(key, None)
    if chunks is None:
        chunks = chunk_corpus(corpus, config, "")
    if len(chunks) <= KEPT_ROWS:
        _CHUNKED[key] = chunks
    while len(_CHUNKED) > KEPT_CHUNKINGS or sum(map(len, _CHUNKED.values())) > KEPT_ROWS:
        _CHUNKED.popitem(last=False)
    return chunks


def chunks_of(
    corpus: pd.DataFrame, chunking: ChunkingConfig, stored: StoredChunks | None = None
) -> pd.DataFrame:
    """`corpus` chunked by `chunking`: the caller's stored table when it has one (`stored`),
    else chunked once in this process (`chunk_once`); the same ids and offsets either way."""
    return chunk_once(corpus, chunking) if stored is None else stored(chunking)


# The metadata fields of a chunk: it is complete when none of them is null, and the ones that
# identify and locate it are not empty either. A title may be empty: several BEIR corpora (FiQA,
# for one) have none, and that is the data, not a broken ingestion.
CHUNK_METADATA = ("text", "url", "title", "chunk_index", "ingested_at", "content_hash")
_NON_EMPTY = ("text", "url", "ingested_at", "content_hash")


def integrity(chunks: pd.DataFrame) -> tuple[float, float]:
    """(metadata completeness rate, hash validation rate) of a CHUNKS table; 1.0 when empty.

    A hash validates when SHA-256 of the stored text equals the stored `content_hash`.
    """
    if chunks.empty:
        return 1.0, 1.0
    present = chunks[list(CHUNK_METADATA)].notna().all(axis=1)
    filled = chunks[list(_NON_EMPTY)].astype(str).ne("").all(axis=1)
    complete = float((present & filled).mean())
    valid = float((chunks["text"].map(content_hash) == chunks["content_hash"]).mean())
    return complete, valid
