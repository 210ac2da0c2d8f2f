"""The `<system>/run` step: the system's top k of every judged query (and of a companion set's),
reused from its cache while its content key is unchanged (docs/architecture.md, "A system's
config, step by step")."""

from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core.gate.changes import chunking_changes
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.storage.reuse import FrameCache, content_key, read_stamp
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.systems import RunInputs, SystemConfig
from rageval_pipeline.defs.assets.beside import baseline_of, baseline_system, open_beside
from rageval_pipeline.defs.assets.chunked import from_storage
from rageval_pipeline.defs.assets.companion import companion
from rageval_pipeline.defs.resources import CONTENT_KEY, Dataset, Settings, StoredTable, stamp_path

# Bump when the Dagster layer changes what a stage produces beyond the system's configuration
# (the chunks' version is chunked.CHUNKS_VERSION).
RUN_VERSION = "2"  # 2: the baseline configuration timed beside the system


def run_sources(system: SystemConfig) -> dict[str, tuple[str, ...]]:
    """What a run is made from, by input name: the asset key of each stored table."""
    sources = {"queries": ("queries",), "qrels": ("qrels",)}
    sources |= {f"member_{m}": (m, "run") for m in system.member_names}
    if system.reads_corpus:
        sources["corpus"] = ("corpus",)
    return sources


def make_run(
    context: dg.AssetExecutionContext, settings: Settings, system: SystemConfig, version: str
) -> pd.DataFrame:
    """The system's run of this partition, from its cache when its content key is unchanged."""
    partition = settings.dataset(context)
    dataset = partition.name
    sources = run_sources(system)
    inputs = {n: settings.stored(*k, partition=dataset) for n, k in sources.items()}
    index_dir = settings.index_dir(system.name, dataset)
    baseline = baseline_of(system, settings, dataset)
    beside = baseline_system(system, partition.reference, baseline)
    key = _run_key(system, version, settings, index_dir, inputs, beside)
    extra = companion(settings, dataset)  # its queries are run too, for PPI
    if key is not None and extra is not None:
        key = content_key(key, extra.key)
    cache = FrameCache(settings.cache_dir(system.name, "run", dataset))
    result = None if settings.force or key is None else cache.get(key)
    reused = result is not None
    if result is None:
        result = _produce(context, settings, partition, system, inputs, (baseline, beside, extra))
        if key is not None:
            cache.put(key, result)
    hits = result[result["doc_id"].notna()]
    context.add_output_metadata(
        {
            "queries": int(result["query_id"].nunique()),
            "rows": len(hits),
            "fingerprint": system.fingerprint(),
            "reused": reused,
            **({CONTENT_KEY: key} if key is not None else {}),
        }
    )
    return result


def _produce(
    context: dg.AssetExecutionContext,
    settings: Settings,
    partition: Dataset,
    system: SystemConfig,
    inputs: dict[str, StoredTable],
    around: tuple,
) -> pd.DataFrame:
    """The run made now. `around`: the stored baseline, the baseline configuration timed beside
    the system, and the companion set."""
    baseline, beside, extra = around
    dataset, reference = partition.name, partition.reference
    queries, qrels = inputs["queries"].frame, inputs["qrels"].frame
    judged = loaders.judged_queries(queries, qrels, settings.split)
    if extra is not None:
        judged = pd.concat([judged, extra.queries], ignore_index=True)
    index_dir = settings.index_dir(system.name, dataset)
    # A chunking change re-runs the baseline's configuration in the metrics step: its whole
    # index is built here once, to time it and then read its hits.
    whole = baseline is not None and bool(
        chunking_changes(baseline.config, system.recorded_config(reference))
    )
    run_inputs = RunInputs(
        queries=judged,
        top_k=settings.depth,
        index_dir=index_dir,
        base_dir=settings.data,
        member_runs={m: inputs[f"member_{m}"].frame for m in system.member_names},
        corpus=inputs["corpus"].frame if system.reads_corpus else None,
        reference=reference,
        stored_chunks=from_storage(settings, dataset, inputs["corpus"], reference, system)
        if system.reads_corpus
        else None,
        embeddings_dir=settings.storage / "embeddings",
        baseline=open_beside(
            context, settings, partition, system, beside, index_dir, timing=not whole
        ),
    )
    return tables.conform(system.produce_run(run_inputs), tables.RUN).to_pandas()


def _run_key(
    system: SystemConfig,
    version: str,
    settings: Settings,
    index_dir: Path,
    inputs: dict[str, StoredTable],
    beside: SystemConfig | None,
) -> str | None:
    """The content key of a run; None when it must not be reused (a live service's answers,
    or an index whose key is unknown). The judged queries follow from queries, qrels and split;
    a reranker's run also depends on the documents' text (`corpus`); its latency, on the
    baseline configuration timed beside it."""
    index_key = read_stamp(stamp_path(index_dir)) if system.indexed else "none"
    if not system.reusable or index_key is None:
        return None
    table_keys = {name: table.key for name, table in inputs.items()}  # content_key sorts them
    timed_beside = None if beside is None else (beside is system, beside.fingerprint())
    return content_key(version, settings.depth, settings.split, index_key, table_keys, timed_beside)
