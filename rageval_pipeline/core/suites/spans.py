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

from rageval_pipeline.core.suites.chunking import ChunkingConfig, split_pieces


def span_sha256(text: str, start: int, end: int) -> str:
    """The SHA-256 hex of `text[start:end]` in UTF-8: a span's `sha256`."""
    return hashlib.sha256(text[start:end].encode("utf-8")).hexdigest()


def chunk_extents(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    """`[start, end)` in `text` of each chunk of `split_text(text, config)`, in the same order,
    for every strategy (the chunker reports them: `chunking.split_pieces`)."""
    return [(piece.start, piece.end) for piece in split_pieces(text, config)]


class Drift(ValueError):
    """A judged span whose text is no longer in its document, or is there more than once."""


class Anchored(NamedTuple):
    start: int
    end: int
    moved: bool  # the judged text was found elsewhere: the span was re-anchored there


# Re-anchoring hashes an excerpt of the span's length at every offset of the document, so its
# work is length x places: 2**27 characters hash in about 0.1 s here (2 cores, idle), and a
# search beyond that is refused rather than run for minutes (a 200,000-character span in a
# 405 kB document is 4 * 10**10).
SEARCH_BUDGET = 2**27


def anchor(text: str, start: int, end: int, sha256: str) -> Anchored:
    """Where the judged text of a span is in `text` now.

    At its offsets when the hash matches there (an edit elsewhere changes nothing); otherwise
    at the one place an excerpt of the same length hashes to it (the text moved), searched
    within `SEARCH_BUDGET`. Drift when no place does (the judged text changed, or its offsets
    are past the end of the document), several do (it cannot be told which is meant), or the
    search would exceed the budget.
    """
    if end <= len(text) and span_sha256(text, start, end) == sha256:
        return Anchored(start, end, moved=False)
    length, places = end - start, len(text) - (end - start) + 1
    past_end = f"end {end} is past the end of the document ({len(text)} characters): fix it"
    if places <= 0:
        raise Drift(past_end)
    if length * places > SEARCH_BUDGET:
        raise Drift(
            f"the judged text is not at its offsets, and searching {places} places of a "
            f"{length}-character span exceeds the re-anchoring budget ({SEARCH_BUDGET} "
            "characters hashed): fix the offsets or re-judge it"
        )
    found = [i for i in range(places) if span_sha256(text, i, i + length) == sha256]
    if len(found) == 1:
        return Anchored(found[0], found[0] + length, moved=True)
    if found:
        places_at = ", ".join(f"{i}-{i + length}" for i in found[:3])
        raise Drift(f"the judged text is now at {len(found)} places ({places_at}); re-judge it")
    if end > len(text):
        raise Drift(past_end)
    raise Drift(
        "the judged text changed (its SHA-256 matches nowhere in the document)"
        + _line_end_hint(text, start, end, sha256)
    )


def _line_end_hint(text: str, start: int, end: int, sha256: str) -> str:
    """A hint when the span matches the document with its CRLF line ends made LF: a checkout
    that converted them (git's `core.autocrlf` on Windows)."""
    if "\r\n" in text and span_sha256(text.replace("\r\n", "\n"), start, end) == sha256:
        return (
            "; it matches with the document's CRLF line ends made LF: check the document out "
            "with LF line ends (`* text eol=lf` in .gitattributes)"
        )
    return ""


class QuoteError(ValueError):
    """A quoted excerpt that is not in a text, or is there more than once."""


def locate_quote(text: str, quote: str, start: int = 0, end: int | None = None) -> tuple[int, int]:
    """`[start, end)` in `text` of an exact quote of `text[start:end]`, whitespace aside: runs
    of whitespace match runs of whitespace (a quote may write a line break as a space), and the
    quote's leading and trailing whitespace is ignored. QuoteError when the quote is empty, is
    not there, or is there more than once (it cannot be told which place is meant)."""
    found = quote_places(text, quote, start, end)
    if not found:
        raise QuoteError(f"quote {_cut(quote)} is not in the text")
    if len(found) > 1:
        raise QuoteError(f"quote {_cut(quote)} is in the text {len(found)} times: quote more")
    return found[0]


def loose_pattern(words: list[str]) -> re.Pattern[str]:
    """The words in order, any whitespace between them: a quote found whatever its line
    breaks and spacing."""
    return re.compile(r"\s+".join(map(re.escape, words)))


def quote_places(
    text: str, quote: str, start: int = 0, end: int | None = None
) -> list[tuple[int, int]]:
    """Every `[start, end)` where `quote` is in `text[start:end]`, whitespace aside (as
    `locate_quote`), overlapping places included. QuoteError when the quote is empty."""
    words = quote.split()
    if not words:
        raise QuoteError("the quote is empty")
    pattern = loose_pattern(words)
    window = text[start:end]
    return [(start + m.start(), start + m.end()) for m in _overlapping(pattern, window)]


def _overlapping(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Every match of `pattern` in `text`, overlapping ones included ("a a" twice in "a a a")."""
    found, at = [], 0
    while (match := pattern.search(text, at)) is not None:
        found.append(match)
        at = match.start() + 1
    return found


def _cut(quote: str, limit: int = 60) -> str:
    flat = " ".join(quote.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")
