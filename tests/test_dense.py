"""Dense retrieval with the real packaged all-MiniLM-L6-v2 on a six-document fixture."""

import hashlib
import itertools
import json
import os
import re
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from pydantic import TypeAdapter

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval import embeddings
from rageval_pipeline.core.retrieval.base import execute
from rageval_pipeline.core.retrieval.dense import DenseIndex, load_model, model_key
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.systems import DenseSystem
from rageval_pipeline.defs.definitions import build_definitions

FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"


DOCUMENT = ChunkingConfig()


def chunks(config: ChunkingConfig = DOCUMENT) -> pd.DataFrame:
    corpus = pd.read_json(FIXTURES / "corpus.jsonl", lines=True, dtype=str)
    corpus = corpus.assign(url="", metadata="{}")
    return chunk_corpus(corpus, config, "2025-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> DenseIndex:
    return DenseIndex.build(chunks(), tmp_path_factory.mktemp("emb"), batch_size=4)


def test_offline_mode_is_forced():
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_model_is_loaded_once_with_max_seq_length():
    model = load_model()
    assert model is load_model()
    assert model.max_seq_length == 256
    assert load_model(max_seq_length=128).max_seq_length == 128


def test_finds_the_semantically_relevant_document(index):
    assert index.search("feline pets that chase rodents", 1)[0].doc_id == "cats:chunk:0"
    hits = index.search("eruption of molten rock", 3)
    assert hits[0] == ("volcano:chunk:0", pytest.approx(hits[0].score), "volcano")
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_vectors_are_normalised_title_plus_text(index):
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-5)
    expected = load_model().encode(["Cats " + chunks()["text"][0]], normalize_embeddings=True)
    np.testing.assert_allclose(index.vectors[0], expected[0], atol=1e-5)


def test_ties_are_broken_by_id_descending(index):
    hits = index.search("chess openings", 2)
    assert [h.doc_id for h in hits] == ["twin-b:chunk:0", "twin-a:chunk:0"]
    assert hits[0].score == hits[1].score


def test_blank_query_returns_nothing(index):
    assert index.search("", 5) == [] and index.search("   ", 5) == []


def test_loading_an_index_loads_and_warms_its_model_before_any_query(index, tmp_path, monkeypatch):
    """A reused index step never loaded the model: loading the index must, so that the first
    query's latency is not the model's load time."""
    from rageval_pipeline.core.retrieval import dense

    index.save(tmp_path / "idx")
    monkeypatch.setattr(dense, "_models", {})
    DenseIndex.load(tmp_path / "idx")
    assert list(dense._models) == [(index.model_name, index.max_seq_length, "cpu")]


def test_save_load_round_trip_gives_identical_runs(index, tmp_path):
    index.save(tmp_path / "idx")
    loaded = DenseIndex.load(tmp_path / "idx")
    queries = pd.DataFrame(
        {"query_id": ["q1", "q2", "q3"], "text": ["moon and sea", "", "how to bake"]}
    )
    first = execute(index.search, queries, 3).drop(columns="latency_ms")
    pd.testing.assert_frame_equal(
        first, execute(loaded.search, queries, 3).drop(columns="latency_ms")
    )
    assert first[first["query_id"] == "q2"]["doc_id"].isna().all()


def test_cache_rerun_embeds_nothing_and_chunking_change_only_new_chunks(tmp_path, monkeypatch):
    model = load_model()
    encoded: list[str] = []
    real_encode = model.encode

    def counting_encode(texts, **kwargs):
        encoded.extend([texts] if isinstance(texts, str) else texts)
        return real_encode(texts, **kwargs)

    monkeypatch.setattr(model, "encode", counting_encode)
    first = DenseIndex.build(chunks(), tmp_path)
    # The two chess twins embed the same text: computed once.
    # (A text alone in its length is sent beside a copy of itself: count distinct texts.)
    assert len(set(encoded)) == 5 and (first.stats.embedded, first.stats.cached) == (5, 0)

    encoded.clear()
    again = DenseIndex.build(chunks(), tmp_path)
    assert encoded == [] and (again.stats.embedded, again.stats.cached) == (0, 6)
    np.testing.assert_array_equal(first.vectors, again.vectors)

    # Paragraph chunking splits only the tide document; every other chunk text is unchanged.
    encoded.clear()
    paragraphs = DenseIndex.build(chunks(ChunkingConfig(strategy="paragraph")), tmp_path)
    assert sorted(set(encoded)) == [
        "Tides Spring tides happen at new and full moon.",
        "Tides The gravitational pull of the moon raises the ocean twice a day.",
    ]
    assert (paragraphs.stats.embedded, paragraphs.stats.cached) == (2, 5)


def test_unknown_model_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="unknown model 'no-such-model'"):
        DenseIndex.build(chunks(), tmp_path, model_name="no-such-model")


def test_the_index_asset_logs_embedding_progress_per_shard_and_overall(pipeline_home, monkeypatch):
    # beir-mini's 44 documents in two shards, at most 8 per model call (batch size 8), a
    # report after each call.
    monkeypatch.setattr(embeddings, "PROGRESS_EVERY_S", 0.0)
    dense = {"retriever": "dense", "batch_size": 8, "shards": 2}
    dense["chunking"] = {"strategy": "reference"}
    (pipeline_home / "data" / "systems.yaml").write_text(json.dumps({"systems": {"dense": dense}}))
    defs = build_definitions()
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        list(defs.assets),
        selection=dg.AssetSelection.assets(["dense", "index"]).upstream(),
        partition_key="beir-mini",
        resources=dict(defs.resources),
        instance=instance,
    )
    assert result.success
    messages = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None]
    progress: dict[str, list[tuple[int, int]]] = {}
    for message in messages:
        if found := re.match(r"dense (shard \d/2 \(\w{12}\)): embedded (\d+)/(\d+) \(", message):
            progress.setdefault(found[1], []).append((int(found[2]), int(found[3])))
            assert " docs/s, ETA " in message
    assert len(progress) == 2
    for reports in progress.values():
        done = [n for n, _ in reports]
        # Batches hold texts of one token length, so a call holds 1 to 8 texts.
        assert done[0] == 0 and done[-1] == reports[0][1]
        assert all(0 < later - before <= 8 for before, later in itertools.pairwise(done))
    assert sum(reports[0][1] for reports in progress.values()) == 44
    (overall,) = [m for m in messages if m.startswith("dense index for beir-mini: {")]
    assert "'shards': 2, 'n_chunks': 44, 'embedded': 44, 'cached': 0," in overall
    meta = result.asset_materializations_for_node("dense__index")[0].metadata
    assert (meta["shards"].value, meta["embedded"].value, meta["reused"].value) == (2, 44, False)
    # Again: the index is current, so no shard is split off and the merge reports reuse.
    again = dg.materialize(
        list(defs.assets),
        selection=dg.AssetSelection.assets(["dense", "index"]),
        partition_key="beir-mini",
        resources=dict(defs.resources),
        instance=instance,
    )
    steps = {e.step_key for e in again.all_events if e.event_type_value == "STEP_SUCCESS"}
    assert steps == {"dense__index.dense__split", "dense__index.dense__merge_index"}
    assert again.asset_materializations_for_node("dense__index")[0].metadata["reused"].value


@pytest.fixture(scope="module")
def int8_index(tmp_path_factory) -> DenseIndex:
    return DenseIndex.build(
        chunks(), tmp_path_factory.mktemp("int8") / "embeddings", backend="onnx-int8"
    )


def test_onnx_int8_backend_is_close_to_torch_and_finds_the_same(index, int8_index, tmp_path):
    cosine = (index.vectors * int8_index.vectors).sum(axis=1)
    assert cosine.min() > 0.97 and not np.array_equal(index.vectors, int8_index.vectors)
    assert np.allclose(np.linalg.norm(int8_index.vectors, axis=1), 1.0, atol=1e-5)
    assert int8_index.search("feline pets that chase rodents", 1)[0].doc_id == "cats:chunk:0"
    # The export sits beside the cache root, and a saved index searches with the same backend.
    (export,) = (Path(int8_index.models_dir)).glob("*-int8.onnx")
    int8_index.save(tmp_path / "idx")
    loaded = DenseIndex.load(tmp_path / "idx")
    assert (loaded.backend, loaded.models_dir) == ("onnx-int8", int8_index.models_dir)
    query = "eruption of molten rock"
    assert loaded.search(query, 3) == int8_index.search(query, 3)
    assert (
        export.stat().st_mtime_ns == next(Path(loaded.models_dir).glob("*.onnx")).stat().st_mtime_ns
    )


def test_backends_never_share_cached_vectors_nor_with_padded_batches():
    # Vectors cached before batches were of one length were computed with padding.
    assert model_key("m", 256) == "m|max_seq_length=256|normalized|batch=by-length"
    int8 = model_key("m", 256, "onnx-int8")
    assert int8 == "m|max_seq_length=256|normalized|batch=by-length|backend=onnx-int8"


def test_the_default_backend_keeps_existing_fingerprints():
    # Before backends (devices, shards) existed, a dense fingerprint hashed every field but the
    # batch size.
    adapter = TypeAdapter(DenseSystem)
    torch_system = adapter.validate_python({"retriever": "dense", "backend": "torch"})
    before = torch_system.model_dump(
        mode="json", exclude={"batch_size", "backend", "device", "shards"}
    )
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert torch_system.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()[:16]
    int8_system = adapter.validate_python({"retriever": "dense", "backend": "onnx-int8"})
    assert int8_system.fingerprint() != torch_system.fingerprint()


def test_onnx_int8_without_its_packages_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(InputError, match=r"needs the onnx extra: pip install"):
        DenseIndex.build(chunks(), tmp_path / "embeddings", backend="onnx-int8")
