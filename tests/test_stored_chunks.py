"""Steps that need a suite's chunks read the stored `<system>/chunks` table rather than chunking
the corpus again: a stored table altered by hand is what a later step sees, and the pooling of
the LLM-label steps indexes what its caller gives."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from rageval_pipeline.core.curation import pool
from rageval_pipeline.core.suites import load_suite, suite_tables
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once
from rageval_pipeline.core.systems import BM25System
from rageval_pipeline.defs.definitions import build_definitions
from rageval_pipeline.defs.resources import Settings

TINY = Path(__file__).parent / "fixtures" / "suites" / "tiny"
CHAIN = ["corpus", "queries", "qrels", "bm25/chunks", "bm25/index", "bm25/run", "bm25/metrics"]


def _metrics(defs: dg.Definitions, selection: list[str], **settings) -> dict:
    """The metadata of bm25/metrics materialized for techdocs with `selection`."""
    result = dg.materialize(
        list(defs.assets),
        selection=selection,
        partition_key="techdocs",
        resources=dict(defs.resources) | {"settings": Settings(**settings)},
    )
    assert result.success
    (event,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey(["bm25", "metrics"])
    ]
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


def test_metrics_read_the_stored_chunks_not_the_corpus_chunked_again(pipeline_home):
    """Qrels coverage and the evidence measures of bm25, which chunks techdocs by its
    reference chunking, count a chunk removed from the stored table as gone."""
    defs = build_definitions()
    before = _metrics(defs, CHAIN)
    assert before["techdocs/qrels_missing_targets"] == 0

    assets = pipeline_home / "storage" / "assets"
    stored = assets / "bm25" / "chunks" / "techdocs.parquet"
    chunks = pq.read_table(stored).to_pandas()
    qrels = pq.read_table(assets / "qrels" / "techdocs.parquet").to_pandas()
    gone = qrels["doc_id"].iloc[0]
    kept = chunks[chunks["chunk_id"] != gone]
    assert len(kept) == len(chunks) - 1
    pq.write_table(pa.Table.from_pandas(kept, preserve_index=False), stored)

    after = _metrics(defs, ["bm25/metrics"], force=True)
    assert after["techdocs/qrels_missing_targets"] == (qrels["doc_id"] == gone).sum() > 0
    assert after["techdocs/EvidenceRecall@10"] < before["techdocs/EvidenceRecall@10"]
    assert after["techdocs/nDCG@10"] == before["techdocs/nDCG@10"]  # the run is the same


def test_pooled_systems_index_the_chunks_the_caller_has_stored(tmp_path):
    """`pool.run_systems` (the LLM-label steps' pooling) indexes the chunks its caller gives;
    without any, the suite is chunked in process."""
    suite = load_suite(TINY)
    bm25 = BM25System(retriever="bm25", chunking=ChunkingConfig(strategy="reference"))
    systems = {"bm25": bm25}
    corpus = suite_tables(suite).corpus
    asked = []

    def stored(chunking: ChunkingConfig):
        asked.append(chunking)
        chunks = chunk_once(corpus, chunking)
        return chunks[chunks["doc_id"] != "faq"]  # as if the stored table lacked a document

    where = dict(embeddings_dir=tmp_path, base_dir=tmp_path)
    own = pool.run_systems(suite, systems, 10, **where)["bm25"]
    given = pool.run_systems(suite, systems, 10, **where, chunks=stored)["bm25"]
    assert asked == [suite.chunking]
    assert "faq:chunk:0" in set(own["doc_id"])
    assert "faq:chunk:0" not in set(given["doc_id"]) and len(given) > 0
