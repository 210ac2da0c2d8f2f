"""Chunk extents: every chunk records where in its document it was cut from (issue 25)."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus, split_pieces

# Markdown with CRLF line ends, a fence hiding a header, tabs, a non-breaking space and
# surrounding blank lines: every place where a chunk's text and its extent could part.
TEXT = (
    "\n  Intro line\twith tab.\r\n\r\n# First\r\nBody one. Second sentence!\r\n"
    "```\r\n# not a header\r\n```\r\n\r\n\r\n## Second\u00a0part\nlast   words here.  \n\n"
)
CONFIGS = [
    ChunkingConfig(strategy="document"),
    ChunkingConfig(strategy="fixed", size=4, overlap=1),
    ChunkingConfig(strategy="paragraph"),
    ChunkingConfig(strategy="markdown_headers"),
    ChunkingConfig(strategy="token", size=4, overlap=1),
    ChunkingConfig(strategy="sentence", size=6, overlap=0),
    ChunkingConfig(strategy="recursive", size=6),
]


def _same_text(config: ChunkingConfig, extent: str, text: str) -> bool:
    """The chunk text is its extent, up to how the strategy rejoins what it cut."""
    if config.strategy == "fixed":
        return extent.split() == text.split(" ")
    if config.strategy == "markdown_headers":
        return "\n".join(extent.splitlines()) == text
    return extent == text


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.strategy)
def test_each_chunk_is_the_text_of_its_extent_and_extents_are_tight(config):
    pieces = split_pieces(TEXT, config)
    assert pieces
    for piece in pieces:
        extent = TEXT[piece.start : piece.end]
        assert _same_text(config, extent, piece.text), (piece, extent)
        assert extent == extent.strip()  # no surrounding whitespace in the extent


def test_fixed_window_extent_runs_from_its_first_to_its_last_token():
    text = "a  bb\tccc\n\ndd e"
    pieces = split_pieces(text, ChunkingConfig(strategy="fixed", size=3, overlap=1))
    assert [(p.text, p.start, p.end) for p in pieces] == [("a bb ccc", 0, 9), ("ccc dd e", 6, 15)]


def test_markdown_sections_with_crlf_keep_their_offsets():
    text = "pre\r\n# A\r\nx\r\n# B\r\ny"
    pieces = split_pieces(text, ChunkingConfig(strategy="markdown_headers"))
    assert [(p.text, p.start, p.end) for p in pieces] == [
        ("pre", 0, 3),
        ("# A\nx", 5, 11),
        ("# B\ny", 13, 19),
    ]


def test_chunk_table_carries_the_extents():
    corpus = pd.DataFrame([dict(doc_id="a", title="", text="  one two three ", url="u")])
    chunks = chunk_corpus(corpus, ChunkingConfig(strategy="fixed", size=2, overlap=0), "t")
    assert chunks[["chunk_id", "start", "end"]].values.tolist() == [
        ["a:chunk:0", 2, 9],
        ["a:chunk:1", 10, 15],
    ]


def test_chonkie_overlapping_windows_overlap_in_the_text():
    text = " ".join(f"w{i}" for i in range(12))
    pieces = split_pieces(text, ChunkingConfig(strategy="token", size=4, overlap=2))
    assert len(pieces) >= 5
    for before, after in itertools.pairwise(pieces):
        assert after.start < before.end  # consecutive windows share text
