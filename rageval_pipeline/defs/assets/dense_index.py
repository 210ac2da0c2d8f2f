"""`<system>/index` of a dense system: split the chunks into shards, embed each shard as its
own step, merge into the index.

The asset is graph-backed: `<system>__split` yields one dynamic output per non-empty
content-addressed shard (core.retrieval.shards), `<system>__embed_shard` runs once per shard
(any executor runs them side by side: processes, Celery workers, Kubernetes pods) and writes
the vectors to the shared embedding cache under `<storage>/embeddings`, and
`<system>__merge_index` builds the index from that cache (it embeds nothing then, so it loads
no model) and writes it exactly as a one-step build would.

Dynamic outputs rather than a shard partition dimension: how many shards are non-empty
depends on the data, a partition dimension would add a key to every asset of the dataset
(chunks, run, metrics, the gate) for what is one asset's internal work, and a backfill over
shards would need a merge outside the run. Within one run, a step per shard is what Dagster's
executors already schedule.

Reuse is decided in the split step: an index whose content key stamp is current yields no
shard, and the merge reports `reused: true`. A re-run after appending documents embeds the
changed shard only: every other shard's texts are cache hits. Shard values pass between steps
through `steps_io` (a filesystem IO manager under the storage folder, which every worker
shares); they are small (shard number, id, sizes), the vectors stay in the cache.
"""

import time

import dagster as dg

from rageval_pipeline.core.retrieval.shards import Shard
from rageval_pipeline.core.storage.reuse import content_key, read_stamp
from rageval_pipeline.core.systems import DenseSystem
from rageval_pipeline.defs.assets.beside import build_stamped
from rageval_pipeline.defs.failures import one_line_errors
from rageval_pipeline.defs.resources import Settings, stamp_path

STEPS_IO = "steps_io"


def build_dense_index(
    system: DenseSystem, version: str, datasets: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    """The graph-backed `<system>/index` asset (op names start with the system's name, as
    k8s run config's `per_step_k8s_config` names them: `dense__embed_shard`)."""
    name = system.name
    split, embed_shard = _split_op(system, version), _embed_op(system)
    merge_index = _merge_op(system)

    @dg.graph_asset(
        key=[name, "index"],
        ins={"chunks": dg.AssetIn(key=dg.AssetKey([name, "chunks"]), dagster_type=dg.Nothing)},
        description=f"The dense index of {name}, embedded shard by shard.",
        code_version=version,
        partitions_def=datasets,
        group_name=f"system_{name}",
    )
    def index(chunks):
        plan, shards = split(chunks)
        return merge_index(plan, shards.map(embed_shard).collect())

    return index


# The steps: plain functions of their inputs (`log`: the step's logger).


def plan_shards(
    settings: Settings, system: DenseSystem, version: str, dataset: str, log
) -> tuple[dict, list[Shard]]:
    """The merge's plan (content key, reuse, start time) and the shards to embed: none when the
    index stamped with the key is in place."""
    chunks = settings.stored(system.name, "chunks", partition=dataset)
    directory = settings.index_dir(system.name, dataset)
    key = content_key(version, chunks.key)
    reused = not settings.force and directory.is_dir() and read_stamp(stamp_path(directory)) == key
    shards = [] if reused else system.split(chunks.frame)
    done = "reused" if reused else f"{len(shards)} shards of {system.shards} buckets"
    log.info(f"{system.name} index for {dataset}: {done}")
    return dict(key=key, reused=reused, start=time.time()), shards


def embed(settings: Settings, system: DenseSystem, dataset: str, shard: Shard, log) -> dict:
    """One shard's texts embedded into the shared cache; what it took."""
    chunks = settings.stored(system.name, "chunks", partition=dataset).frame
    embeddings = settings.storage / "embeddings"
    stats = system.embed_shard(chunks, shard, embeddings_dir=embeddings, log=log.info)
    log.info(f"{system.name} {shard.label} for {dataset}: {stats}")
    return stats


def merge(
    settings: Settings, system: DenseSystem, dataset: str, plan: dict, embedded: list[dict], log
) -> dict:
    """The index built from the cache (embedding nothing) and stamped; its metadata."""
    directory = settings.index_dir(system.name, dataset)
    if plan["reused"]:
        return {"reused": True, "path": str(directory)}
    chunks = settings.stored(system.name, "chunks", partition=dataset)
    stats = build_stamped(system, chunks.frame, directory, settings, plan["key"], log.info)
    overall = _overall(embedded, time.time() - plan["start"])
    log.info(f"{system.name} index for {dataset}: {overall}; merge {stats}")
    return {**overall, "merge_seconds": stats["seconds"], "reused": False, "path": str(directory)}


# The ops: each wires its step to Dagster.


def _split_op(system: DenseSystem, version: str) -> dg.OpDefinition:
    @dg.op(
        name=f"{system.name}__split",
        ins={"chunks": dg.In(dg.Nothing)},
        out={
            "plan": dg.Out(io_manager_key=STEPS_IO),
            "shards": dg.DynamicOut(io_manager_key=STEPS_IO),
        },
    )
    @one_line_errors
    def split(context: dg.OpExecutionContext, settings: Settings):
        dataset = settings.dataset(context).name
        plan, shards = plan_shards(settings, system, version, dataset, context.log)
        yield dg.Output(plan, "plan")
        for shard in shards:
            yield dg.DynamicOutput(shard, mapping_key=f"shard_{shard.number}", output_name="shards")

    return split


def _embed_op(system: DenseSystem) -> dg.OpDefinition:
    @dg.op(name=f"{system.name}__embed_shard", out=dg.Out(io_manager_key=STEPS_IO))
    @one_line_errors
    def embed_shard(context: dg.OpExecutionContext, settings: Settings, shard: Shard) -> dict:
        stats = embed(settings, system, settings.dataset(context).name, shard, context.log)
        context.add_output_metadata({**stats, "texts": shard.texts})
        return stats

    return embed_shard


def _merge_op(system: DenseSystem) -> dg.OpDefinition:
    @dg.op(name=f"{system.name}__merge_index", out=dg.Out(dg.Nothing))
    @one_line_errors
    def merge_index(
        context: dg.OpExecutionContext, settings: Settings, plan: dict, embedded: list[dict]
    ) -> None:
        dataset = settings.dataset(context).name
        context.add_output_metadata(merge(settings, system, dataset, plan, embedded, context.log))

    return merge_index


def _overall(embedded: list[dict], seconds: float) -> dict:
    """What the shard steps did together: texts, embedded, cached, and the throughput over the
    wall time from split to merge (shards run side by side on a parallel executor)."""
    done = sum(s["embedded"] for s in embedded)
    return dict(
        shards=len(embedded),
        n_chunks=sum(s["n_chunks"] for s in embedded),
        embedded=done,
        cached=sum(s["cached"] for s in embedded),
        seconds=round(seconds, 3),
        docs_per_s=round(done / seconds, 1) if done and seconds else 0.0,
    )
