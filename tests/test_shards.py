"""Sharded dense embedding equals the one-step build exactly: same vectors (bit for bit), same
run, for any shard count and any order of shards, on beir-mini with the packaged MiniLM and on
a 5,000-document synthetic corpus with a tiny model built here (random weights, no download).
Shards are stable under appends."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.core.retrieval.base import execute
from rageval_pipeline.core.retrieval.dense import DenseIndex
from rageval_pipeline.core.retrieval.shards import split
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.suites.loaders import read_corpus, read_queries
from rageval_pipeline.core.systems import TIMING_SAMPLE, DenseSystem
from tests.tiny_bert import save_tiny_bi_encoder

BEIR_MINI = Path(__file__).resolve().parents[1] / "data" / "suites" / "beir-mini"
WORDS = [f"w{i}" for i in range(300)]


def corpus_chunks(corpus: pd.DataFrame, chunking: ChunkingConfig | None = None):
    chunking = chunking or ChunkingConfig()
    return chunk_corpus(corpus.assign(url="", metadata="{}"), chunking, "2026-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer BERT over WORDS with random weights (tests/tiny_bert.py)."""
    return save_tiny_bi_encoder(tmp_path_factory.mktemp("tiny-bi-encoder"), WORDS)


def synthetic(n: int, seed: int = 7) -> pd.DataFrame:
    """`n` documents of 3 to 80 random words: many token lengths, some past truncation."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(3, 80))) for _ in range(n)]
    ids = [f"d{i:05d}" for i in range(n)]
    return pd.DataFrame({"doc_id": ids, "title": [""] * n, "text": texts})


def build_sharded(
    system: DenseSystem, chunks: pd.DataFrame, cache: Path, target: Path, seed: int
) -> DenseIndex:
    """Embed every shard in a shuffled order, then merge: the merge embeds nothing."""
    shards = system.split(chunks)
    random.Random(seed).shuffle(shards)
    for shard in shards:
        system.embed_shard(chunks, shard, embeddings_dir=cache)
    stats = system.build_index(chunks, target, embeddings_dir=cache)
    assert (stats["embedded"], stats["cached"]) == (0, len(chunks))
    return DenseIndex.load(target)


def assert_same_index_and_run(
    system: DenseSystem,
    chunks: pd.DataFrame,
    queries: pd.DataFrame,
    tmp_path: Path,
    counts: tuple[int, ...] = (1, 2, 4),
) -> None:
    whole = DenseIndex.build(
        chunks,
        tmp_path / "whole-cache",
        model_name=system.model,
        batch_size=system.batch_size,
        max_seq_length=system.max_seq_length,
    )
    expected_run = execute(whole.search, queries, 10).drop(columns="latency_ms")
    for count in counts:
        sharded = system.model_copy(update={"shards": count})
        index = build_sharded(
            sharded, chunks, tmp_path / f"cache-{count}", tmp_path / f"index-{count}", count
        )
        assert np.array_equal(index.vectors, whole.vectors), f"{count} shards"
        assert list(index.ids) == list(whole.ids) and index.sources == whole.sources
        run = execute(index.search, queries, 10).drop(columns="latency_ms")
        pd.testing.assert_frame_equal(run, expected_run)


def test_beir_mini_sharded_equals_unsharded_exactly(tmp_path):
    chunks = corpus_chunks(read_corpus(BEIR_MINI / "corpus.jsonl"))
    queries = read_queries(BEIR_MINI / "queries.jsonl")
    system = DenseSystem(retriever="dense", batch_size=8)
    assert_same_index_and_run(system, chunks, queries, tmp_path)


def test_five_thousand_documents_sharded_equal_unsharded_exactly(tiny_model, tmp_path):
    chunks = corpus_chunks(synthetic(5000))
    rng = random.Random(1)
    queries = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(20)],
            "text": [" ".join(rng.choices(WORDS, k=5)) for _ in range(20)],
        }
    )
    system = DenseSystem(retriever="dense", model=str(tiny_model), max_seq_length=64)
    assert_same_index_and_run(system, chunks, queries, tmp_path)


def test_appending_a_document_changes_exactly_one_shard(tiny_model):
    corpus = synthetic(400)
    # Fixed windows: the new document has several chunks, all in its document's shard.
    chunking = ChunkingConfig(strategy="fixed", size=16, overlap=4)
    new = pd.DataFrame({"doc_id": ["appended"], "title": [""], "text": [" ".join(WORDS[:60])]})
    before = corpus_chunks(corpus, chunking)
    after = corpus_chunks(pd.concat([corpus, new], ignore_index=True), chunking)
    assert (after["doc_id"] == "appended").sum() > 1
    for count in (2, 4, 16):
        old = {s.number: s.id for s in split(before, count)}
        changed = {s.number for s in split(after, count) if old.get(s.number) != s.id}
        assert len(changed) == 1, count


def test_a_shard_whose_chunks_changed_is_refused_in_one_line(tmp_path):
    from rageval_pipeline.core.errors import InputError

    chunks = corpus_chunks(synthetic(20))
    system = DenseSystem(retriever="dense", shards=2)
    shard = system.split(chunks)[0]
    changed = chunks.assign(text=chunks["text"] + " w1")
    with pytest.raises(InputError, match=r"shard \d/2 \(\w{12}\): the chunks changed since"):
        system.embed_shard(changed, shard, embeddings_dir=tmp_path)


def test_a_timing_index_embeds_a_sample_and_is_as_large_as_the_whole(tiny_model, tmp_path):
    """The baseline's configuration timed beside a changed system (docs/gate.md) embeds
    TIMING_SAMPLE chunks, not the corpus; its index still holds a vector per chunk, so a
    search multiplies as many vectors as the whole index's does."""
    chunks = corpus_chunks(synthetic(1000))
    system = DenseSystem(retriever="dense", model=str(tiny_model), max_seq_length=64)
    cache = tmp_path / "cache"
    stats = system.build_timing_index(chunks, tmp_path / "timing", embeddings_dir=cache)
    step = -(-len(chunks) // TIMING_SAMPLE)
    sample = chunks.iloc[::step]  # spread over the corpus
    assert (stats["embedded"], stats["cached"]) == (len(sample), 0) and len(sample) <= TIMING_SAMPLE
    index = DenseIndex.load(tmp_path / "timing")
    assert index.vectors.shape == (len(chunks), 32) and list(index.ids) == list(chunks["chunk_id"])
    whole = system.build_index(chunks, tmp_path / "whole", embeddings_dir=cache)
    assert (whole["embedded"], whole["cached"]) == (len(chunks) - len(sample), len(sample))
    vectors = DenseIndex.load(tmp_path / "whole").vectors
    assert np.array_equal(index.vectors[: len(sample)], vectors[::step])
    assert np.array_equal(index.vectors[len(sample) :], index.vectors[: len(chunks) - len(sample)])
    assert len(index.search("w1 w2 w3", 10)) == 10
