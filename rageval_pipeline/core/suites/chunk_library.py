"""Chunkers from chonkie (a maintained chunking library) rather than hand-written splitters.

chonkie was chosen over semchunk because it reports each chunk's character offsets into the
text (`start_index`, `end_index`), which evidence spans are matched against, and has token,
sentence and recursive chunkers behind one interface. Its `word` tokenizer is built in: no
tokenizer or model is downloaded at run time, and sizes are counted the same on every machine.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chonkie import BaseChunker


@functools.lru_cache(maxsize=16)
def _chunker(strategy: str, size: int, overlap: int) -> BaseChunker:
    from chonkie import RecursiveChunker, SentenceChunker, TokenChunker

    match strategy:
        case "token":
            return TokenChunker(tokenizer="word", chunk_size=size, chunk_overlap=overlap)
        case "sentence":
            return SentenceChunker(tokenizer="word", chunk_size=size, chunk_overlap=overlap)
        case "recursive":
            return RecursiveChunker(tokenizer="word", chunk_size=size)
    raise ValueError(f"chunking {strategy!r} is not one of chonkie's")


def library_extents(text: str, strategy: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """chonkie's chunks of `text` by `strategy` (`size`, `overlap` in words) as character
    extents (start, end exclusive)."""
    if not text.strip():
        return []
    return [(c.start_index, c.end_index) for c in _chunker(strategy, size, overlap)(text)]
