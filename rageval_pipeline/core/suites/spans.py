"""Evidence spans: judged excerpts of a document, named by character offsets and a hash.

A span is `[start, end)` in characters of the document text with the SHA-256 (hex, UTF-8) of
`text[start:end]`. The hash is what survives an edit: `anchor` finds where the judged text is
now, so an edit elsewhere in the document is accepted, a moved excerpt is re-anchored by exact
search, and a changed one is refused (docs/suite-format.md).

`chunk_extents` gives the character extent of every chunk `chunking.split_text` makes, in
the original text: a chunk's text is not always a substring of its document (fixed windows join
their tokens with single spaces, Markdown sections join lines with "\\n"), but it is always the
normalised form of one contiguous excerpt, and that excerpt is what a span names.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from rageval_pipeline.core.suites.chunking import ChunkingConfig

_TOKEN = re.compile(r"\S+")  # the tokens of str.split(): re's \s is str.isspace
_BLANK_LINES = re.compile(r"\n\s*\n")  # chunking's paragraph separator
_HEADER = re.compile(r"^#{1,6} ")
_FENCE = re.compile(r"^\s*```")


def span_sha256(text: str, start: int, end: int) -> str:
    """The SHA-256 hex of `text[start:end]` in UTF-8: a span's `sha256`."""
    return hashlib.sha256(text[start:end].encode("utf-8")).hexdigest()


def _stripped(text: str, start: int, end: int) -> tuple[int, int] | None:
    """`[start, end)` without its leading and trailing whitespace; None when nothing is left."""
    piece = text[start:end]
    body = piece.strip()
    if not body:
        return None
    lead = len(piece) - len(piece.lstrip())
    return start + lead, start + lead + len(body)


def chunk_extents(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    """`[start, end)` in `text` of each chunk of `split_text(text, config)`, in the same order.

    Whitespace is stripped from every extent exactly as split_text strips its chunks; line ends
    are whitespace (str.splitlines' separators all are), so both drop the same chunks.
    """
    match config.strategy:
        case "document":
            pieces = [(0, len(text))]
        case "fixed":
            tokens = [m.span() for m in _TOKEN.finditer(text)]
            step, pieces = config.size - config.overlap, []
            for first in range(0, len(tokens), step):
                last = min(first + config.size, len(tokens)) - 1
                pieces.append((tokens[first][0], tokens[last][1]))
                if first + config.size >= len(tokens):
                    break
        case "paragraph":
            cuts = [0, *(i for m in _BLANK_LINES.finditer(text) for i in m.span()), len(text)]
            pieces = list(zip(cuts[::2], cuts[1::2], strict=True))
        case "markdown_headers":
            pieces = _markdown_extents(text)
        case "reference":
            raise ValueError("resolve the `reference` chunking for a dataset before splitting")
    return [e for s, t in pieces if (e := _stripped(text, s, t)) is not None]


def _markdown_extents(text: str) -> list[tuple[int, int]]:
    """Sections as chunking's `_markdown_sections` cuts them, as ranges of the original text."""
    sections: list[tuple[int, int]] = []
    start = offset = 0
    in_fence = False
    for line in text.splitlines(keepends=True):
        content = line.splitlines()[0]  # the line without its line end, as splitlines() gives
        if _FENCE.match(content):
            in_fence = not in_fence
        elif not in_fence and _HEADER.match(content):
            sections.append((start, offset))
            start = offset
        offset += len(line)
    sections.append((start, offset))
    return sections


class Drift(ValueError):
    """A judged span whose text is no longer in its document, or is there more than once."""


class Anchored(NamedTuple):
    start: int
    end: int
    moved: bool  # the judged text was found elsewhere: the span was re-anchored there


def anchor(text: str, start: int, end: int, sha256: str) -> Anchored:
    """Where the judged text of a span is in `text` now.

    At its offsets when the hash matches there (an edit elsewhere changes nothing); otherwise
    at the one place an excerpt of the same length hashes to it (the text moved). Drift when
    no place does (the judged text changed) or several do (it cannot be told which is meant).
    """
    if end <= len(text) and span_sha256(text, start, end) == sha256:
        return Anchored(start, end, moved=False)
    length = end - start
    found = [
        i
        for i in range(len(text) - length + 1)
        if hashlib.sha256(text[i : i + length].encode("utf-8")).hexdigest() == sha256
    ]
    if len(found) == 1:
        return Anchored(found[0], found[0] + length, moved=True)
    if found:
        places = ", ".join(f"{i}-{i + length}" for i in found[:3])
        raise Drift(f"the judged text is now at {len(found)} places ({places}); re-judge it")
    raise Drift("the judged text changed (its SHA-256 matches nowhere in the document)")
