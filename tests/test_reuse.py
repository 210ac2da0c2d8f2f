"""Content keys and the table cache behind warm re-runs (core.storage.reuse), without Dagster."""

from __future__ import annotations

import pandas as pd

from rageval_pipeline.core.storage.reuse import (
    FrameCache,
    content_key,
    folder_key,
    read_stamp,
    write_stamp,
)

FRAME = pd.DataFrame({"doc_id": ["a", "b"], "text": ["x y", None], "n": [1, 2]})


def test_content_key_depends_on_every_part_and_their_order():
    keys = {
        content_key("v1", 10, {"a": 1}),
        content_key("v1", 10, {"a": 2}),
        content_key("v2", 10, {"a": 1}),
        content_key(10, "v1", {"a": 1}),
    }
    assert len(keys) == 4
    assert content_key("v1", {"b": 1, "a": 2}) == content_key("v1", {"a": 2, "b": 1})


def test_frame_cache_keeps_only_the_latest_key(tmp_path):
    cache = FrameCache(tmp_path / "c")
    assert cache.get("k1") is None
    cache.put("k1", FRAME)
    pd.testing.assert_frame_equal(cache.get("k1"), FRAME)
    cache.put("k2", FRAME.iloc[:1])
    assert cache.get("k1") is None
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["k2.parquet"]


def test_frame_cache_keeps_a_record_with_its_table(tmp_path):
    cache = FrameCache(tmp_path / "c")
    cache.put("k1", FRAME, {"run_id": "r1", "means": {"RR": 0.5}})
    assert cache.record("k1") == {"run_id": "r1", "means": {"RR": 0.5}}
    cache.put("k2", FRAME)
    assert cache.record("k1") is None and cache.record("k2") is None
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["k2.parquet"]


def test_folder_key_follows_every_file_name_and_content(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    first = folder_key(tmp_path)
    assert folder_key(tmp_path) == first
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\t2\n")
    changed = folder_key(tmp_path)
    (tmp_path / "qrels" / "test.tsv").rename(tmp_path / "qrels" / "dev.tsv")
    renamed = folder_key(tmp_path)
    (tmp_path / "queries.jsonl").write_text("")
    assert len({first, changed, renamed, folder_key(tmp_path)}) == 4


def test_stamps_are_written_read_and_forgotten(tmp_path):
    stamp = tmp_path / "idx.key"
    assert read_stamp(stamp) is None
    write_stamp(stamp, "abc")
    assert read_stamp(stamp) == "abc"
    write_stamp(stamp, None)
    assert read_stamp(stamp) is None and not stamp.exists()
