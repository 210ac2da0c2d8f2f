"""`<system>/chunks` and `<system>/index` of an indexed system: the first two links of its chain
(defs/assets/systems.py builds the rest)."""

from datetime import UTC, datetime

import dagster as dg

from rageval_pipeline.core.storage.reuse import FrameCache, content_key, read_stamp
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.systems import DenseSystem, SystemConfig
from rageval_pipeline.defs.assets.beside import build_stamped
from rageval_pipeline.defs.assets.chunked import chunks_key
from rageval_pipeline.defs.assets.dense_index import build_dense_index
from rageval_pipeline.defs.checks import CHUNK_CHECKS, chunk_check_results
from rageval_pipeline.defs.failures import one_line_errors
from rageval_pipeline.defs.partitions import partitioned_check
from rageval_pipeline.defs.resources import CONTENT_KEY, Dataset, Settings, stamp_path


def reference_of(dataset: Dataset) -> ChunkingConfig | None:
    return loaders.reference_chunking(dataset.folder)


def index_assets(system: SystemConfig, versions: dict, datasets: dg.PartitionsDefinition) -> list:
    """`<system>/chunks` and `<system>/index` of an indexed system (a dense one's embeds its
    corpus shard by shard: defs/assets/dense_index.py)."""
    name = system.name
    common = dict(partitions_def=datasets, group_name=f"system_{name}")

    @dg.asset(
        key=[name, "chunks"],
        deps=["corpus"],
        check_specs=[
            partitioned_check(check, asset=[name, "chunks"], partitions_def=datasets, blocking=True)
            for check in CHUNK_CHECKS
        ],
        description=f"Chunks for {name}: {system.chunking.strategy} chunking.",
        kinds={"parquet"},
        code_version=versions["chunks"],
        **common,
    )
    @one_line_errors
    def chunks(context: dg.AssetExecutionContext, settings: Settings):
        partition = settings.dataset(context)
        dataset = partition.name
        corpus = settings.stored("corpus", partition=dataset)
        chunking = system.chunking.resolve(reference_of(partition))
        key = chunks_key(system, chunking, corpus.key)
        cache = FrameCache(settings.cache_dir(name, "chunks", dataset))
        df = None if settings.force else cache.get(key)
        reused = df is not None
        if df is None:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            df = chunk_corpus(corpus.frame, chunking, stamp)
            cache.put(key, df)
        meta = {"chunks": len(df), "documents": corpus.rows, "chunking": chunking.strategy}
        # A reused table is not written again: the IO manager keeps the file of the same key.
        yield dg.Output(df, metadata=meta | {"reused": reused, CONTENT_KEY: key})
        yield from chunk_check_results(df)

    if isinstance(system, DenseSystem):
        return [chunks, build_dense_index(system, versions["index"], datasets)]

    @dg.asset(
        key=[name, "index"],
        deps=[dg.AssetKey([name, "chunks"])],
        description=f"The {system.retriever} index of {name}.",
        code_version=versions["index"],
        **common,
    )
    @one_line_errors
    def index(context: dg.AssetExecutionContext, settings: Settings) -> dg.MaterializeResult:
        dataset = settings.dataset(context).name
        chunks = settings.stored(name, "chunks", partition=dataset)
        directory = settings.index_dir(name, dataset)
        key = content_key(versions["index"], chunks.key)
        if not settings.force and directory.is_dir() and read_stamp(stamp_path(directory)) == key:
            return dg.MaterializeResult(metadata={"reused": True, "path": str(directory)})
        stats = build_stamped(system, chunks.frame, directory, settings, key, context.log.info)
        context.log.info(f"{name} index for {dataset}: {stats}")
        return dg.MaterializeResult(metadata={**stats, "reused": False, "path": str(directory)})

    return [chunks, index]
