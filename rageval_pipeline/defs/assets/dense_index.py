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
    chunks_key = dg.AssetKey([name, "chunks"])

    @dg.op(
        name=f"{name}__split",
        ins={"chunks": dg.In(dg.Nothing)},
        out={
            "plan": dg.Out(io_manager_key=STEPS_IO),
            "shards": dg.DynamicOut(io_manager_key=STEPS_IO),
        },
    )
    @one_line_errors
    def split(context: dg.OpExecutionContext, settings: Settings):
        dataset = settings.dataset(context).name
        chunks = settings.stored(name, "chunks", partition=dataset)
        directory = settings.index_dir(name, dataset)
        key = content_key(version, chunks.key)
        reused = (
            not settings.force and directory.is_dir() and read_stamp(stamp_path(directory)) == key
        )
        shards = [] if reused else system.split(chunks.frame)
        context.log.info(
            f"{name} index for {dataset}: "
            + ("reused" if reused else f"{len(shards)} shards of {system.shards} buckets")
        )
        yield dg.Output(dict(key=key, reused=reused, start=time.time()), "plan")
        for shard in shards:
            yield dg.DynamicOutput(shard, mapping_key=f"shard_{shard.number}", output_name="shards")

    @dg.op(name=f"{name}__embed_shard", out=dg.Out(io_manager_key=STEPS_IO))
    @one_line_errors
    def embed_shard(context: dg.OpExecutionContext, settings: Settings, shard: Shard) -> dict:
        dataset = settings.dataset(context).name
        chunks = settings.stored(name, "chunks", partition=dataset).frame
        stats = system.embed_shard(
            chunks, shard, embeddings_dir=settings.storage / "embeddings", log=context.log.info
        )
        context.log.info(f"{name} {shard.label} for {dataset}: {stats}")
        context.add_output_metadata({**stats, "texts": shard.texts})
        return stats

    @dg.op(name=f"{name}__merge_index", out=dg.Out(dg.Nothing))
    @one_line_errors
    def merge_index(
        context: dg.OpExecutionContext, settings: Settings, plan: dict, embedded: list[dict]
    ) -> None:
        dataset = settings.dataset(context).name
        directory = settings.index_dir(name, dataset)
        if plan["reused"]:
            context.add_output_metadata({"reused": True, "path": str(directory)})
            return
        chunks = settings.stored(name, "chunks", partition=dataset)
        stats = build_stamped(
            system, chunks.frame, directory, settings, plan["key"], context.log.info
        )
        overall = _overall(embedded, time.time() - plan["start"])
        context.log.info(f"{name} index for {dataset}: {overall}; merge {stats}")
        meta = {**overall, "merge_seconds": stats["seconds"]}
        context.add_output_metadata({**meta, "reused": False, "path": str(directory)})

    @dg.graph_asset(
        key=[name, "index"],
        ins={"chunks": dg.AssetIn(key=chunks_key, dagster_type=dg.Nothing)},
        description=f"The dense index of {name}, embedded shard by shard.",
        code_version=version,
        partitions_def=datasets,
        group_name=f"system_{name}",
    )
    def index(chunks):
        plan, shards = split(chunks)
        return merge_index(plan, shards.map(embed_shard).collect())

    return index


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
