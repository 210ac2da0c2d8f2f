import hashlib
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.chunk_ids import source_ids
from rageval_pipeline.core.suites import load_suite, suite_tables
from rageval_pipeline.core.suites.chunking import (
    ChunkingConfig,
    chunk_corpus,
    chunk_once,
    integrity,
    split_text,
)

WHEN = "2025-01-01T00:00:00Z"
TINY = Path(__file__).parent / "fixtures" / "suites" / "tiny"


def corpus(*docs: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(doc_id=d, title=f"T {d}", text=t, url=f"https://x/{d}", metadata="{}")
            for d, t in docs
        ]
    )


def test_document_strategy_is_one_chunk_per_document_without_the_title():
    chunks = chunk_corpus(corpus(("a", "  alpha beta  "), ("b", "gamma")), ChunkingConfig(), WHEN)
    assert chunks["chunk_id"].tolist() == ["a:chunk:0", "b:chunk:0"]
    assert chunks["text"].tolist() == ["alpha beta", "gamma"]
    assert chunks["title"].tolist() == ["T a", "T b"]
    assert chunks["url"].tolist() == ["https://x/a", "https://x/b"]
    assert set(chunks["ingested_at"]) == {WHEN}


def test_chunk_table_has_the_chunks_schema():
    chunks = chunk_corpus(corpus(("a", "x")), ChunkingConfig(), WHEN)
    assert list(chunks.columns) == tables.CHUNKS.names
    assert tables.conform(chunks, tables.CHUNKS).schema.equals(tables.CHUNKS)


def test_fixed_windows_share_overlap_tokens_and_last_window_ends_at_last_token():
    text = " ".join(f"w{i}" for i in range(10))
    parts = split_text(text, ChunkingConfig(strategy="fixed", size=4, overlap=1))
    assert parts == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    parts = split_text(text, ChunkingConfig(strategy="fixed", size=4, overlap=2))
    assert parts[-1].split()[-1] == "w9"
    assert parts == ["w0 w1 w2 w3", "w2 w3 w4 w5", "w4 w5 w6 w7", "w6 w7 w8 w9"]


def test_fixed_short_document_is_one_window():
    assert split_text("a b", ChunkingConfig(strategy="fixed", size=4, overlap=1)) == ["a b"]


def test_fixed_tokens_are_whitespace_separated():
    parts = split_text("a\tb\n\nc  d e", ChunkingConfig(strategy="fixed", size=3, overlap=0))
    assert parts == ["a b c", "d e"]


@pytest.mark.parametrize(("size", "overlap"), [(4, 4), (4, 5)])
def test_overlap_must_be_smaller_than_size(size, overlap):
    with pytest.raises(ValidationError, match="overlap"):
        ChunkingConfig(strategy="fixed", size=size, overlap=overlap)


def test_overlap_limit_applies_to_fixed_only():
    assert ChunkingConfig(strategy="paragraph", size=4, overlap=4).overlap == 4


@pytest.mark.parametrize(
    "bad", [dict(size=0), dict(overlap=-1), dict(strategy="sentences"), dict(extra=1)]
)
def test_invalid_configs_are_rejected(bad):
    with pytest.raises(ValidationError):
        ChunkingConfig(**bad)


def test_paragraph_splits_on_blank_lines_and_drops_empty_chunks():
    text = "one\nstill one\n\n  \n\ntwo\n   \nthree\n\n\n"
    parts = split_text(text, ChunkingConfig(strategy="paragraph"))
    assert parts == ["one\nstill one", "two", "three"]


def test_markdown_headers_start_sections_and_keep_preamble():
    text = "intro line\n# One\nbody 1\n## Two\nbody 2\n#not a header\n####### seven"
    parts = split_text(text, ChunkingConfig(strategy="markdown_headers"))
    assert parts == ["intro line", "# One\nbody 1", "## Two\nbody 2\n#not a header\n####### seven"]


def test_markdown_headers_inside_code_fences_do_not_split():
    text = "# Real\n```bash\n# a shell comment\n```\nafter\n  ```\n# also fenced\n```\n# Next"
    parts = split_text(text, ChunkingConfig(strategy="markdown_headers"))
    assert parts == [
        "# Real\n```bash\n# a shell comment\n```\nafter\n  ```\n# also fenced\n```",
        "# Next",
    ]


def test_ids_are_numbered_after_dropping_empty_chunks_and_are_stable():
    docs = corpus(("d", "\n\nfirst\n\n\n\nsecond\n\n"), ("e", "   "))
    config = ChunkingConfig(strategy="paragraph")
    once = chunk_corpus(docs, config, WHEN)
    assert once["chunk_id"].tolist() == ["d:chunk:0", "d:chunk:1"]
    assert once["chunk_index"].tolist() == [0, 1]
    assert once["doc_id"].tolist() == ["d", "d"]
    pd.testing.assert_frame_equal(once, chunk_corpus(docs, config, WHEN))


def test_content_hash_is_sha256_of_the_chunk_text():
    chunks = chunk_corpus(
        corpus(("a", "héllo\n\nworld")), ChunkingConfig(strategy="paragraph"), WHEN
    )
    for text, digest in zip(chunks["text"], chunks["content_hash"], strict=True):
        assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert chunks["content_hash"].nunique() == 2


def test_empty_corpus_gives_empty_chunk_table():
    empty = chunk_corpus(corpus(), ChunkingConfig(), WHEN)
    assert empty.empty and list(empty.columns) == tables.CHUNKS.names


def test_null_text_gives_no_chunks():
    docs = corpus(("a", "x"))
    docs.loc[0, "text"] = None
    assert chunk_corpus(docs, ChunkingConfig(), WHEN).empty


def test_reference_strategy_resolves_to_the_datasets_chunking():
    suite = ChunkingConfig(strategy="markdown_headers")
    reference = ChunkingConfig(strategy="reference")
    assert reference.resolve(suite) == suite
    assert reference.resolve(None) == ChunkingConfig(strategy="document")
    fixed = ChunkingConfig(strategy="fixed", size=10, overlap=2)
    assert fixed.resolve(suite) == fixed
    with pytest.raises(ValueError, match="resolve the `reference` chunking"):
        split_text("text", reference)


def test_integrity_rates_catch_missing_metadata_and_tampered_text():
    chunks = chunk_corpus(corpus(("a", "one two"), ("b", "three four")), ChunkingConfig(), WHEN)
    chunks["url"] = "https://example.org/doc"
    assert integrity(chunks) == (1.0, 1.0)
    missing_url = chunks.assign(url=["https://example.org/doc", ""])
    assert integrity(missing_url) == (0.5, 1.0)
    tampered = chunks.assign(text=["one two", "three five"])
    assert integrity(tampered) == (1.0, 0.5)
    untitled = chunks.assign(title="")  # BEIR corpora such as FiQA have no titles
    assert integrity(untitled) == (1.0, 1.0)
    assert integrity(chunks.assign(title=[None, "T"])) == (0.5, 1.0)


def test_source_ids_take_the_document_part_of_chunk_ids_only():
    ids = pd.Series(["a:chunk:0", "b:c:chunk:12", "plain", "x:chunk:", "y:chunk:1a"])
    assert source_ids(ids).tolist() == ["a", "b:c", "plain", "x:chunk:", "y:chunk:1a"]


def test_a_suite_is_chunked_once_per_chunking_until_its_documents_change(tmp_path):
    folder = Path(shutil.copytree(TINY, tmp_path / "tiny"))
    suite = load_suite(folder)
    chunks = chunk_once(suite_tables(suite).corpus, suite.chunking)
    pd.testing.assert_frame_equal(
        chunks, chunk_corpus(suite_tables(suite).corpus, suite.chunking, "")
    )
    assert chunk_once(suite_tables(load_suite(folder)).corpus, suite.chunking) is chunks

    windows = ChunkingConfig(strategy="fixed", size=4, overlap=0)
    other = chunk_once(suite_tables(suite).corpus, windows)
    assert other is not chunks and len(other) > len(chunks)
    assert chunk_once(suite_tables(suite).corpus, suite.chunking) is chunks

    guide = folder / "documents" / "auth-guide.md"
    guide.write_text(guide.read_text() + "\n# Revoking\nRevoke a token from the console.\n")
    changed = chunk_once(suite_tables(load_suite(folder)).corpus, suite.chunking)
    assert changed is not chunks
    assert changed["text"].str.contains("Revoke a token").any()
    assert not chunks["text"].str.contains("Revoke a token").any()


def test_chunks_kept_in_a_process_are_bounded_in_rows(monkeypatch):
    from rageval_pipeline.core.suites import chunking

    corpus = suite_tables(load_suite(TINY)).corpus
    windows = ChunkingConfig(strategy="fixed", size=4, overlap=0)
    monkeypatch.setattr(chunking, "_CHUNKED", type(chunking._CHUNKED)())
    whole = chunk_once(corpus, ChunkingConfig(strategy="document"))
    monkeypatch.setattr(chunking, "KEPT_ROWS", len(whole) + 1)
    small = chunk_once(corpus, windows)  # more rows than the bound: returned, not kept
    assert len(small) > len(whole) and chunk_once(corpus, windows) is not small
    assert chunk_once(corpus, ChunkingConfig(strategy="document")) is whole
