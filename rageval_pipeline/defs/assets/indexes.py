"""`<system>/chunks` and `<system>/index` of an indexed system: the first two links of its chain
(defs/assets/systems.py builds the rest)."""

from datetime import UTC, datetime

import dagster as dg

from rageval_pipeline.core.storage.reuse import FrameCache, content_key, read_stamp
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.systems import DenseSystem, SystemConfig
from rageval_pipeline.defs.assets.beside import build_stamped
from rageval_pipeline.defs.assets.chunked import chunks_key
from rageval_pipeline.defs.assets.dense_index import build_dense_index
from rageval_pipeline.defs.checks import CHUNK_CHECKS, chunk_check_results
from rageval_pipeline.defs.failures import one_line_errors
from rageval_pipeline.defs.partitions import partitioned_check
from rageval_pipeline.defs.resources import CONTENT_KEY, Dataset, Settings, stamp_path


def index_assets(system: SystemConfig, versions: dict, datasets: dg.PartitionsDefinition) -> list:
    """`<system>/chunks` and `<system>/index` of an indexed system (a dense one's embeds its
    corpus shard by shard: defs/assets/dense_index.py)."""
    common = dict(partitions_def=datasets, group_name=f"system_{system.name}")
    chunks = _chunks_asset(system, versions["chunks"], datasets, common)
    if isinstance(system, DenseSystem):
        return [chunks, build_dense_index(system, versions["index"], datasets)]
    return [chunks, _index_asset(system, versions["index"], common)]


def make_chunks(settings: Settings, system: SystemConfig, partition: Dataset) -> tuple:
    """The system's chunks of the stored corpus, reused while their content key is unchanged:
    (table, metadata)."""
    dataset = partition.name
    corpus = settings.stored("corpus", partition=dataset)
    chunking = system.run_chunking(partition.reference)
    key = chunks_key(system, chunking, corpus.key)
    cache = FrameCache(settings.cache_dir(system.name, "chunks", dataset))
    df = None if settings.force else cache.get(key)
    reused = df is not None
    if df is None:
        df = chunk_corpus(corpus.frame, chunking, datetime.now(UTC).isoformat(timespec="seconds"))
        cache.put(key, df)
    meta = {"chunks": len(df), "documents": corpus.rows, "chunking": chunking.strategy}
    return df, meta | {"reused": reused, CONTENT_KEY: key}


def build_index(settings: Settings, system: SystemConfig, version: str, dataset: str, log) -> dict:
    """The system's index of its stored chunks, or the folder stamped with the same key; its
    metadata."""
    chunks = settings.stored(system.name, "chunks", partition=dataset)
    directory = settings.index_dir(system.name, dataset)
    key = content_key(version, chunks.key)
    if not settings.force and directory.is_dir() and read_stamp(stamp_path(directory)) == key:
        return {"reused": True, "path": str(directory)}
    stats = build_stamped(system, chunks.frame, directory, settings, key, log.info)
    log.info(f"{system.name} index for {dataset}: {stats}")
    return {**stats, "reused": False, "path": str(directory)}


def _chunks_asset(
    system: SystemConfig, version: str, datasets: dg.PartitionsDefinition, common: dict
) -> dg.AssetsDefinition:
    key = [system.name, "chunks"]

    @dg.asset(
        key=key,
        deps=["corpus"],
        check_specs=[
            partitioned_check(check, asset=key, partitions_def=datasets, blocking=True)
            for check in CHUNK_CHECKS
        ],
        description=f"Chunks for {system.name}: {system.chunking.strategy} chunking.",
        kinds={"parquet"},
        code_version=version,
        **common,
    )
    @one_line_errors
    def chunks(context: dg.AssetExecutionContext, settings: Settings):
        df, meta = make_chunks(settings, system, settings.dataset(context))
        # A reused table is not written again: the IO manager keeps the file of the same key.
        yield dg.Output(df, metadata=meta)
        yield from chunk_check_results(df)

    return chunks


def _index_asset(system: SystemConfig, version: str, common: dict) -> dg.AssetsDefinition:
    @dg.asset(
        key=[system.name, "index"],
        deps=[dg.AssetKey([system.name, "chunks"])],
        description=f"The {system.retriever} index of {system.name}.",
        code_version=version,
        **common,
    )
    @one_line_errors
    def index(context: dg.AssetExecutionContext, settings: Settings) -> dg.MaterializeResult:
        dataset = settings.dataset(context).name
        meta = build_index(settings, system, version, dataset, context.log)
        return dg.MaterializeResult(metadata=meta)

    return index
