"""The embedding cache with a counting fake encoder (the real model is in test_dense.py)."""

import hashlib
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow.parquet as pq
import pytest

from rageval_pipeline.core.retrieval import embeddings
from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache, embed


def fake_vector(text: str) -> np.ndarray:
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).standard_normal(8).astype(np.float32)


class CountingEncoder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return np.stack([fake_vector(t) for t in texts])


def shards(cache: EmbeddingCache) -> list:
    return sorted(cache.directory.glob("shard-*.parquet"))


def test_rerun_embeds_nothing_and_returns_the_same_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path, "model-a")
    texts = [f"text {i}" for i in range(10)]
    first_encoder, second_encoder = CountingEncoder(), CountingEncoder()
    first, stats1 = embed(texts, cache, first_encoder)
    second, stats2 = embed(texts, cache, second_encoder)
    assert len(first_encoder.seen) == 10 and (stats1.embedded, stats1.cached) == (10, 0)
    assert second_encoder.seen == [] and (stats2.embedded, stats2.cached) == (0, 10)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first[3], fake_vector("text 3"))


def test_changed_chunking_embeds_only_the_changed_texts(tmp_path):
    cache = EmbeddingCache(tmp_path, "model-a")
    embed(["a", "b", "c"], cache, CountingEncoder())
    encoder = CountingEncoder()
    vectors, stats = embed(["a", "b changed", "c", "d"], cache, encoder)
    assert sorted(encoder.seen) == ["b changed", "d"]
    assert (stats.n, stats.embedded, stats.cached) == (4, 2, 2)
    np.testing.assert_array_equal(vectors[1], fake_vector("b changed"))


def test_identical_texts_are_embedded_once(tmp_path):
    encoder = CountingEncoder()
    vectors, _ = embed(["x", "y", "x"], EmbeddingCache(tmp_path, "m"), encoder)
    assert encoder.seen == ["x", "y"]
    np.testing.assert_array_equal(vectors[0], vectors[2])


def test_model_keys_do_not_share_vectors(tmp_path):
    embed(["x"], EmbeddingCache(tmp_path, "model-a"), CountingEncoder())
    encoder = CountingEncoder()
    embed(["x"], EmbeddingCache(tmp_path, "model-a|max_seq_length=128"), encoder)
    assert encoder.seen == ["x"]


def test_vectors_are_stored_in_shards_not_one_file_per_text(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "SHARD_ROWS", 4)
    cache = EmbeddingCache(tmp_path, "m")
    embed([f"t{i}" for i in range(10)], cache, CountingEncoder())
    files = shards(cache)
    assert [pq.read_metadata(f).num_rows for f in files] == [4, 4, 2]
    embed([f"t{i}" for i in range(10)], cache, CountingEncoder())
    assert shards(cache) == files  # a re-run writes nothing


def test_interrupted_build_keeps_finished_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "SHARD_ROWS", 4)
    cache = EmbeddingCache(tmp_path, "m")
    texts = [f"t{i}" for i in range(10)]
    calls = 0

    def dies_on_second_batch(batch: list[str]) -> np.ndarray:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return CountingEncoder()(batch)

    with pytest.raises(KeyboardInterrupt):
        embed(texts, cache, dies_on_second_batch)
    encoder = CountingEncoder()
    embed(texts, cache, encoder)
    assert len(encoder.seen) == 6


def test_failed_write_leaves_no_partial_shard(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path, "m")

    def write_half_then_fail(table, where):
        with open(where, "wb") as f:
            f.write(b"PAR1 half a shard")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        cache.put(["k"], np.ones((1, 8), dtype=np.float32))
    assert list(cache.directory.iterdir()) == []


def test_concurrent_processes_share_the_cache_safely(tmp_path):
    # Two processes embed overlapping texts at once; both succeed, every shard is whole, and a
    # third run finds everything cached.
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        from pathlib import Path
        from rageval_pipeline.core.retrieval import embeddings
        embeddings.SHARD_ROWS = 7
        cache = embeddings.EmbeddingCache(Path({str(tmp_path)!r}), "m")
        texts = [f"t{{i}}" for i in range(int(sys.argv[1]), int(sys.argv[1]) + 60)]
        embeddings.embed(texts, cache, lambda b: np.ones((len(b), 8), dtype=np.float32))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, start]) for start in ("0", "30")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    cache = EmbeddingCache(tmp_path, "m")
    assert all(pq.read_metadata(f).num_rows > 0 for f in shards(cache))
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".tmp-")]
    encoder = CountingEncoder()
    embed([f"t{i}" for i in range(90)], cache, encoder)
    assert encoder.seen == []


def test_stats_report_throughput_of_computed_embeddings_only(tmp_path):
    cache = EmbeddingCache(tmp_path, "m")
    _, computed = embed(["a", "b"], cache, CountingEncoder())
    _, cached = embed(["a", "b"], cache, CountingEncoder())
    assert computed.docs_per_s > 0 and cached.docs_per_s == 0.0
    assert cached.as_metadata() == dict(
        n_chunks=2, embedded=0, cached=2, seconds=round(cached.seconds, 3), docs_per_s=0.0
    )


def test_empty_input(tmp_path):
    vectors, stats = embed([], EmbeddingCache(tmp_path, "m"), CountingEncoder())
    assert vectors.shape[0] == 0 and stats.n == 0


def test_batches_hold_one_length_longest_first_and_never_span_two_files(tmp_path, monkeypatch):
    """A batch of one length needs no padding, so a text's vector cannot depend on its batch
    partners; batches go longest first (ties by key, not the caller's order), hold at most
    rows_per_call texts and end where a cache file does."""
    monkeypatch.setattr(embeddings, "SHARD_ROWS", 4)
    texts = ["a b", "c", "d e f", "g h", "i j k", "l m n", "o p q", "r s", "t"]

    def words(batch: list[str]) -> list[int]:
        return [len(t.split()) for t in batch]

    encoder = CountingEncoder()
    calls: list[list[str]] = []

    def recording(batch: list[str]) -> np.ndarray:
        calls.append(batch)
        return encoder(batch)

    vectors, _ = embed(
        texts, EmbeddingCache(tmp_path, "m"), recording, lengths=words, rows_per_call=3
    )
    assert all(len(set(words(batch))) == 1 for batch in calls)
    assert [len(batch) for batch in calls] == [3, 1, 3, 1, 1]
    expected = sorted(texts, key=lambda t: (-len(t.split()), embeddings.text_key(t)))
    assert encoder.seen == expected and expected != sorted(texts, key=lambda t: -len(t))
    # ...while the rows come back in the caller's order.
    np.testing.assert_array_equal(vectors, np.stack([fake_vector(t) for t in texts]))


def test_default_length_is_characters(tmp_path):
    encoder = CountingEncoder()
    calls: list[int] = []

    def recording(batch: list[str]) -> np.ndarray:
        calls.append(len(batch))
        return encoder(batch)

    embed(["bb", "a", "cc", "ddd", "e"], EmbeddingCache(tmp_path, "m"), recording)
    assert calls == [1, 2, 2]


def test_progress_reports_done_total_rate_and_eta(tmp_path):
    reports: list[embeddings.Progress] = []
    texts = [f"text number {i}" for i in range(10)]
    embed(
        texts,
        EmbeddingCache(tmp_path, "m"),
        CountingEncoder(),
        progress=reports.append,
        progress_every_s=0.0,
        rows_per_call=4,
    )
    assert [(p.done, p.total) for p in reports] == [(0, 10), (4, 10), (8, 10), (10, 10)]
    assert str(reports[0]) == "embedded 0/10 (0%), 0.0 docs/s, ETA ?"
    assert all(p.docs_per_s > 0 and p.eta_seconds is not None for p in reports[1:])
    assert reports[-1].eta_seconds == 0.0
    # After one call (4 texts of 13 characters, "text number 0".."9"; calls of one size so
    # far) the time is taken as per character: 6 of the 10 texts are left.
    first = reports[1]
    assert first.eta_seconds == pytest.approx(first.seconds * 6 / 4)
    assert str(reports[-1]).startswith("embedded 10/10 (100%), ")
    assert str(reports[-1]).endswith(" docs/s, ETA 0 s")


def test_the_eta_is_the_calls_left_at_the_measured_fixed_and_per_token_cost(tmp_path, monkeypatch):
    # A clock only the encoder moves: each call costs 0.5 s plus 0.01 s a character of its
    # batch, so many small calls of short texts (longest go first) cost mostly the 0.5 s that
    # characters left alone would miss.
    clock = [0.0]
    monkeypatch.setattr(embeddings.time, "perf_counter", lambda: clock[0])

    def timed(batch: list[str]) -> np.ndarray:
        clock[0] += 0.5 + 0.01 * sum(len(t) for t in batch)
        return CountingEncoder()(batch)

    texts = [("x" * 40) + str(i) for i in range(4)] + ["y" * n for n in range(1, 9)]
    reports: list[embeddings.Progress] = []
    embed(
        texts,
        EmbeddingCache(tmp_path, "m"),
        timed,
        progress=reports.append,
        progress_every_s=0.0,
        rows_per_call=4,
    )
    end = reports[-1].seconds
    for report in reports[3:]:  # from the third call on (the first: warm-up) it is exact
        assert report.eta_seconds == pytest.approx(end - report.seconds)
    first = reports[1]  # one call of 4 x 41 characters: per character only, an underestimate
    assert first.eta_seconds < end - first.seconds


def test_progress_is_reported_before_the_interval_would_run_out(tmp_path, monkeypatch):
    # A clock only the encoder moves, so a loaded machine cannot shift the reports.
    clock = [0.0]
    monkeypatch.setattr(embeddings.time, "perf_counter", lambda: clock[0])
    reports: list[embeddings.Progress] = []
    cache = EmbeddingCache(tmp_path, "m")
    # Fast calls, a long interval: the start and the end only.
    embed(["a", "b", "c"], cache, CountingEncoder(), progress=reports.append, rows_per_call=1)
    assert [(p.done, p.total) for p in reports] == [(0, 3), (3, 3)]
    # Calls of 0.04 s and an interval of 0.1 s: one more call would pass it after two calls.
    reports.clear()

    def slow(batch: list[str]) -> np.ndarray:
        clock[0] += 0.04
        return CountingEncoder()(batch)

    texts = [f"t{i}" for i in range(6)]
    embed(texts, cache, slow, progress=reports.append, progress_every_s=0.1, rows_per_call=1)
    assert [p.done for p in reports] == [0, 2, 4, 6]
    # Nothing to embed: nothing to report.
    reports.clear()
    embed(["a", "b", "c"], cache, CountingEncoder(), progress=reports.append)
    assert reports == []


def test_progress_comes_every_tenth_of_the_texts_but_not_within_the_gap(tmp_path, monkeypatch):
    # A clock only the encoder moves; the default interval (30 s) never runs out here.
    clock = [0.0]
    monkeypatch.setattr(embeddings.time, "perf_counter", lambda: clock[0])
    texts = [f"t{i:02d}" for i in range(20)]  # 20 texts, a call each: a tenth is 2 calls

    def taking(seconds: float):
        def encode(batch: list[str]) -> np.ndarray:
            clock[0] += seconds
            return CountingEncoder()(batch)

        return encode

    done = []
    for call_s, name in ((1.5, "slow"), (0.5, "fast"), (0.0, "instant")):
        reports: list[embeddings.Progress] = []
        cache = EmbeddingCache(tmp_path, name)
        embed(texts, cache, taking(call_s), progress=reports.append, rows_per_call=1)
        done.append([p.done for p in reports])
    gap = embeddings.PROGRESS_GAP_S
    assert gap == 2.0 and embeddings.PROGRESS_STEP == 0.1
    # 1.5 s a call: a tenth (3 s) is past the gap: a line every tenth.
    assert done[0] == [0, *range(2, 21, 2)]
    # 0.5 s a call: a tenth (1 s) is within the gap: a line every 4 calls (2 s).
    assert done[1] == [0, 4, 8, 12, 16, 20]
    # No time passing: the start and the end only.
    assert done[2] == [0, 20]


def test_a_short_time_left_is_said_as_under_five_seconds():
    Progress = embeddings.Progress
    assert str(Progress(3, 10, 1.0, 4.9)).endswith(", ETA under 5 s")
    assert str(Progress(3, 10, 1.0, 5.0)).endswith(", ETA 5 s")
    assert str(Progress(3, 10, 1.0, 0.0)).endswith(", ETA under 5 s")  # calls left: not 0 s
    assert str(Progress(10, 10, 2.0, 0.0)).endswith(", ETA 0 s")  # done
    assert str(Progress(0, 10, 0.0, None)).endswith(", ETA ?")
