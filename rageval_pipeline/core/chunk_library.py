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

    from rageval_pipeline.core.chunking import ChunkingConfig, Piece


@functools.lru_cache(maxsize=16)
def _chunker(config: ChunkingConfig) -> BaseChunker:
    from chonkie import RecursiveChunker, SentenceChunker, TokenChunker

    match config.strategy:
        case "token":
            return TokenChunker(
                tokenizer="word", chunk_size=config.size, chunk_overlap=config.overlap
            )
        case "sentence":
            return SentenceChunker(
                tokenizer="word", chunk_size=config.size, chunk_overlap=config.overlap
            )
        case "recursive":
            return RecursiveChunker(tokenizer="word", chunk_size=config.size)
    raise ValueError(f"chunking {config.strategy!r} is not one of chonkie's")


def library_pieces(text: str, config: ChunkingConfig) -> list[Piece]:
    """chonkie's chunks of `text` as pieces: each chunk's text is `text[start:end]`."""
    from rageval_pipeline.core.chunking import Piece

    if not text.strip():
        return []
    return [
        Piece(chunk.text, chunk.start_index, chunk.end_index) for chunk in _chunker(config)(text)
    ]
