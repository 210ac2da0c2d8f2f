"""Steps that need a suite's chunks read the stored `<system>/chunks` table rather than chunking
the corpus again: a stored table altered by hand is what a later step sees, while a table made
from an older corpus is not read, and the pooling of the LLM-label steps indexes what its caller
gives."""

from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rageval_pipeline.core.curation import pool
from rageval_pipeline.core.history.summaries import select_runs, summaries
from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.suites import load_suite, suite_tables
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once
from rageval_pipeline.core.systems import BM25System, load_systems
from rageval_pipeline.defs.assets import gate
from rageval_pipeline.defs.assets.llm_labels import LabelSettings
from rageval_pipeline.defs.definitions import build_definitions
from rageval_pipeline.defs.resources import Settings

TINY = Path(__file__).parent / "fixtures" / "suites" / "tiny"
INGESTED = ["corpus", "queries", "qrels"]
CHAIN = [*INGESTED, "bm25/chunks", "bm25/index", "bm25/run", "bm25/metrics"]


def _materialize(defs: dg.Definitions, selection: list[str], **settings):
    """`selection` materialized for techdocs: the run's result."""
    result = dg.materialize(
        list(defs.assets),
        selection=selection,
        partition_key="techdocs",
        resources=dict(defs.resources) | {"settings": Settings(**settings)},
    )
    assert result.success
    return result


def _metrics(defs: dg.Definitions, selection: list[str], **settings) -> dict:
    """The metadata of bm25/metrics materialized for techdocs with `selection`."""
    result = _materialize(defs, selection, **settings)
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


def _gate_snippet(target: str) -> str | None:
    """The gate's snippet of `target` beside the latest evaluations of techdocs."""
    settings = Settings()
    store = open_warehouse(settings.storage)
    with store.read():
        runs = summaries(store, select_runs(store, dataset="techdocs"))
    catalog = load_systems(settings.data / "systems.yaml")
    texts = gate.texts_beside_ids(settings, "techdocs", {target}, runs, catalog)
    return texts.target("techdocs", target)


def _pooled_chunks() -> pd.DataFrame | None:
    """The chunks the LLM-label steps' pooling indexes for bm25 on techdocs, None when it
    chunks the suite itself."""
    settings = Settings()
    suite = load_suite(settings.dataset_folder("techdocs"))
    pooling = LabelSettings(systems=["bm25"]).pooling(settings, "techdocs", suite)
    return None if pooling.stored_chunks is None else pooling.stored_chunks(suite.chunking)


def test_chunks_of_an_older_corpus_are_not_read(pipeline_home):
    """A judged document edited and ingested again, bm25/chunks not: bm25's metrics (a new
    corpus, so measured again, over the stored run) and the gate's snippets read the corpus as
    it is now, chunked in process; the metrics score as they do once bm25/chunks is
    materialized again; so does the LLM-label steps' pooling, which reads no stored chunks
    while the suite is newer than the stored corpus. The stored chunks of the unchanged corpus,
    altered by hand, stay what they all read until then."""
    defs = build_definitions()
    _metrics(defs, CHAIN)
    stored = pipeline_home / "storage" / "assets" / "bm25" / "chunks" / "techdocs.parquet"
    chunks = pq.read_table(stored).to_pandas()
    gone = "authentication-guide:chunk:5"
    assert _gate_snippet(gone) is not None
    kept = chunks[chunks["chunk_id"] != gone]
    pq.write_table(pa.Table.from_pandas(kept, preserve_index=False), stored)  # stamp kept
    _materialize(defs, INGESTED)  # the same documents: the stored corpus is kept
    assert _metrics(defs, ["bm25/metrics"], force=True)["techdocs/qrels_missing_targets"] > 0
    assert _gate_snippet(gone) is None
    assert len(_pooled_chunks()) == len(kept)
    # bm25 configured to chunk as it did, but spelled otherwise: another chunks code version,
    # so its stored table is not trusted.
    systems = pipeline_home / "data" / "systems.yaml"
    configured = systems.read_text()
    systems.write_text(configured.replace('"reference"', '"markdown_headers"'))
    assert len(_pooled_chunks()) == len(chunks)
    systems.write_text(configured)

    guide = pipeline_home / "data" / "suites" / "techdocs" / "documents" / "authentication-guide.md"
    first = "## Authentication methods at a glance"
    added = "## Where to start\n\nA section added after bm25 chunked the guide.\n\n"
    guide.write_text(guide.read_text().replace(first, added + first, 1))
    assert _pooled_chunks() is None  # the suite is newer than the stored corpus: not pooled
    edited = _metrics(defs, [*INGESTED, "bm25/metrics"])
    assert edited["older_corpus_chunks"] == "bm25"  # the run predates the corpus: said
    assert _gate_snippet("authentication-guide:chunk:1").startswith("## Where to start")
    assert "A section added after" in " ".join(_pooled_chunks()["text"])
    assert pq.read_table(stored).num_rows == len(kept)  # bm25/chunks was not materialized
    fresh = _metrics(defs, ["bm25/chunks", "bm25/metrics"], force=True)
    assert "A section added after" in " ".join(pq.read_table(stored)["text"].to_pylist())
    assert "older_corpus_chunks" not in fresh
    scores = {k: v for k, v in fresh.items() if k.startswith("techdocs/")}
    assert {k: edited[k] for k in scores} == scores
    assert scores["techdocs/qrels_missing_targets"] == 0


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
    given = pool.run_systems(suite, systems, 10, **where, stored_chunks=stored)["bm25"]
    assert asked == [suite.chunking]
    assert "faq:chunk:0" in set(own["doc_id"])
    assert "faq:chunk:0" not in set(given["doc_id"]) and len(given) > 0
