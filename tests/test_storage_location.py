"""The storage folder on object storage (core.storage.location), against a local moto S3
server: a file is there whole or not at all, a folder (an index) is published files first and
manifest last and read back as a local copy, and what must stay local stays in the scratch
folder."""

from __future__ import annotations

import hashlib
import uuid

import numpy as np
import pandas as pd
import pytest
from upath import UPath

from rageval_pipeline.core.retrieval.base import REBUILD_INDEX
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache
from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.storage.files import atomic_dir, atomic_path, write_parquet, write_text
from rageval_pipeline.core.storage.location import (
    MANIFEST,
    StorageError,
    parquet_rows,
    read_parquet,
    verified_dir,
)
from rageval_pipeline.core.storage.reuse import FrameCache, file_digest, read_stamp, write_stamp
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE
from tests.moto_s3 import moto_server

CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["a:chunk:0", "b:chunk:0", "c:chunk:0"],
        "doc_id": ["a", "b", "c"],
        "title": "",
        "text": ["descale the espresso machine", "burr grinders crush beans", "froth cold milk"],
    }
)


@pytest.fixture(scope="module")
def s3_env():
    with moto_server() as env, pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()  # a cached client would keep an old endpoint
        s3fs.S3FileSystem().mkdir("bucket")
        yield env


@pytest.fixture
def store(s3_env, tmp_path, monkeypatch) -> UPath:
    """A fresh storage URL on the moto server, with its scratch folder in tmp_path."""
    monkeypatch.setenv("RAGEVAL_SCRATCH", str(tmp_path / "scratch"))
    return UPath(f"s3://bucket/{uuid.uuid4().hex}")


def test_a_file_is_uploaded_whole_when_its_write_succeeds_and_not_at_all_when_it_fails(store):
    path = store / "reports" / "gate.json"
    write_text(path, "old\n")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half of a new")
        assert path.read_text() == "old\n"  # nothing is visible before the block ends
        raise RuntimeError("killed half-way")
    assert path.read_text() == "old\n"
    write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert [p.name for p in (store / "reports").iterdir()] == ["gate.json"]  # no temp objects


def test_a_missing_bucket_is_one_line_naming_it(s3_env):
    with pytest.raises(StorageError) as err:
        write_text(UPath("s3://no-such-bucket/eval/assets/x.parquet.key"), "k\n")
    assert str(err.value) == (
        "s3://no-such-bucket: no such bucket: create it, or point RAGEVAL_STORAGE at one"
    )


def test_tables_stamps_and_stage_caches_round_trip(store):
    frame = pd.DataFrame({"query_id": ["q1", "q2"], "value": [0.5, 1.0]})
    path = store / "assets" / "queries" / "techdocs.parquet"
    write_parquet(frame, path)
    pd.testing.assert_frame_equal(read_parquet(path).to_pandas(), frame)
    assert parquet_rows(path) == 2
    assert file_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    stamp = path.with_name(path.name + ".key")
    write_stamp(stamp, "k1")
    assert read_stamp(stamp) == "k1"
    write_stamp(stamp, None)
    assert read_stamp(stamp) is None
    cache = FrameCache(store / "cache" / "bm25" / "run" / "techdocs")
    cache.put("k1", frame, {"rows": 2})
    cache.put("k2", frame.head(1))
    assert cache.get("k1") is None and cache.record("k1") is None  # only the latest is kept
    pd.testing.assert_frame_equal(cache.get("k2"), frame.head(1))


def test_an_index_is_published_and_read_back_through_one_local_copy(store, tmp_path):
    index = BM25Index.build(CHUNKS)
    folder = store / "indexes" / "bm25" / "techdocs"
    index.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        p.name for p in verified_dir(folder, REBUILD_INDEX).iterdir()
    )
    loaded = BM25Index.load(folder)
    assert loaded.search("espresso descale", 3) == index.search("espresso descale", 3)
    copy = verified_dir(folder, REBUILD_INDEX)
    assert copy.is_relative_to(tmp_path / "scratch") and verified_dir(folder, REBUILD_INDEX) == copy
    # A rebuilt index is a new copy; the old one is dropped.
    BM25Index.build(CHUNKS.head(2)).save(folder)
    fresh = verified_dir(folder, REBUILD_INDEX)
    assert fresh != copy and not copy.exists()
    assert BM25Index.load(folder).search("milk", 3) == []


def test_a_failed_index_write_leaves_the_published_one(store):
    folder = store / "indexes" / "bm25" / "techdocs"
    BM25Index.build(CHUNKS).save(folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(RuntimeError), atomic_dir(folder) as tmp:
        (tmp / "ids.json").write_text("[]")
        raise RuntimeError("killed half-way")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


@pytest.mark.parametrize("damage", ["manifest", "truncate"])
def test_an_unpublished_or_damaged_index_is_one_line_naming_the_url(store, damage):
    folder = store / "indexes" / "bm25" / "techdocs"
    BM25Index.build(CHUNKS).save(folder)
    if damage == "manifest":  # how a reader finds an index mid-publish: no manifest yet
        (folder / MANIFEST).unlink()
        expected = f"{folder}: missing or incomplete (no {MANIFEST}): {REBUILD_INDEX}"
    else:
        ids = folder / "ids.json"
        whole = ids.read_bytes()
        ids.write_bytes(whole[:10])
        expected = f"{ids}: truncated or altered (10 of {len(whole)} bytes): {REBUILD_INDEX}"
    with pytest.raises(StorageError) as err:
        BM25Index.load(folder)
    assert str(err.value) == expected
    assert "moto-test" not in str(err.value)


def test_embedding_shards_are_shared_through_the_bucket(store):
    vectors = np.arange(6, dtype=np.float32).reshape(3, 2)
    EmbeddingCache(store / "embeddings", "model").put(["k1", "k2", "k3"], vectors)
    found = EmbeddingCache(store / "embeddings", "model").get(["k3", "k1", "other"])
    assert set(found) == {"k1", "k3"}
    assert np.array_equal(found["k3"], vectors[2])


def test_what_must_be_local_stays_in_the_scratch_folder(store, tmp_path):
    # The warehouse of a URL is a lake in the bucket (core.storage.lake); a DuckDB file, asked
    # for by name, would be local: in the scratch folder.
    assert open_warehouse(store).location == f"s3://{store.path}/lake"
    duckdb_file = open_warehouse(store, kind="duckdb")
    assert duckdb_file.path == (tmp_path / "scratch" / "s3" / store.path / WAREHOUSE_FILE)
    assert open_warehouse(tmp_path / "local").path == tmp_path / "local" / WAREHOUSE_FILE
