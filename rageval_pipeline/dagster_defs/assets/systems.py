"""One asset chain per configured retrieval system, built from data/systems.yaml.

bm25/dense: `<system>/chunks` -> `<system>/index` -> `<system>/run` -> `<system>/metrics`;
fusion systems read their members' runs (so the lineage graph shows what is fused);
the user's own systems (run file, HTTP, Python entry point) start at `<system>/run`.
A system is an asset-key prefix rather than a partition dimension because fusion depends on
other systems' runs of the same dataset, which prefixes express directly.
"""

import json
import time
from datetime import UTC, datetime

import dagster as dg
import pandas as pd

from rageval_pipeline.core import beir, loaders, systems, tables
from rageval_pipeline.core.chunking import ChunkingConfig, chunk_corpus, integrity
from rageval_pipeline.core.conventions import QrelsCoverage, qrels_coverage
from rageval_pipeline.core.evaluate import quality_report
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.results import measure_run
from rageval_pipeline.core.retrieval import execute
from rageval_pipeline.core.storage import write_parquet, write_text
from rageval_pipeline.dagster_defs.assets.ingest import dataset_folder
from rageval_pipeline.dagster_defs.resources import Settings


def chunk_check_results(chunks: pd.DataFrame) -> list[dg.AssetCheckResult]:
    """Seed 003's integrity checks; anything under 100% fails them."""
    complete, valid = integrity(chunks)
    return [
        dg.AssetCheckResult(
            check_name="metadata_complete",
            passed=complete == 1.0,
            metadata={"metadata_completeness_rate": complete, "chunks": len(chunks)},
        ),
        dg.AssetCheckResult(
            check_name="hashes_valid",
            passed=valid == 1.0,
            metadata={"hash_validation_rate": valid, "chunks": len(chunks)},
        ),
    ]


def _means_table(means: pd.DataFrame) -> str:
    """Every mean with its 95% bootstrap interval, as a Markdown table for the UI."""
    rows = [
        f"| {r.measure} | {round_metric(r.value)} | [{round_metric(r.ci_low)}, "
        f"{round_metric(r.ci_high)}] |"
        for r in means.itertuples(index=False)
    ]
    return "\n".join(["| measure | mean | 95% CI |", "| --- | --- | --- |", *rows])


def _coverage_text(coverage: QrelsCoverage, identical: int) -> str:
    """The dataset conventions applied to this run, for its quality report."""
    text = (
        f"\n**Qrels coverage:** {coverage.missing_documents} of {coverage.judgments} judgments "
        f"name a document absent from the corpus and {coverage.missing_queries} judged queries "
        "are absent from the queries file; they are kept, as trec_eval keeps them (they cap "
        "recall)."
    )
    if coverage.examples:
        text += f" Examples: {', '.join(coverage.examples)}."
    if identical:
        text += f" {identical} retrieved documents were the query itself and were dropped."
    return text + "\n"


def reference_of(settings: Settings, dataset: str) -> ChunkingConfig | None:
    return loaders.reference_chunking(dataset_folder(settings, dataset))


def _chunk_level(
    system: systems.SystemConfig, catalog: dict, reference: ChunkingConfig | None
) -> bool:
    """Chunk-level judgments apply only when every chunking behind the run is the suite's."""
    if reference is None:
        return False
    if system.is_fusion:
        return all(_chunk_level(catalog[m], catalog, reference) for m in system.members)
    return system.needs_index and system.chunking.resolve(reference) == reference


def _config(system: systems.SystemConfig, reference: ChunkingConfig | None) -> dict:
    """The system's configuration as recorded with a run, `reference` chunking resolved."""
    config = system.model_dump(mode="json")
    if system.needs_index:
        config["chunking"] = system.chunking.resolve(reference).model_dump(mode="json")
    return config


def build_system_assets(
    system: systems.SystemConfig,
    catalog: dict[str, systems.SystemConfig],
    datasets: dg.PartitionsDefinition,
) -> list[dg.AssetsDefinition]:
    name = system.name
    group = f"system_{name}"
    common = dict(partitions_def=datasets, group_name=group, code_version="1")
    fingerprint = system.fingerprint()
    out: list[dg.AssetsDefinition] = []

    if system.needs_index:

        @dg.asset(
            key=[name, "chunks"],
            ins={"corpus": dg.AssetIn("corpus")},
            check_specs=[
                dg.AssetCheckSpec("metadata_complete", asset=[name, "chunks"], blocking=True),
                dg.AssetCheckSpec("hashes_valid", asset=[name, "chunks"], blocking=True),
            ],
            description=f"Chunks for {name}: {system.chunking.strategy} chunking.",
            kinds={"parquet"},
            **common,
        )
        def chunks(context: dg.AssetExecutionContext, settings: Settings, corpus: pd.DataFrame):
            chunking = system.chunking.resolve(reference_of(settings, context.partition_key))
            ingested_at = datetime.now(UTC).isoformat(timespec="seconds")
            df = chunk_corpus(corpus, chunking, ingested_at)
            meta = {"chunks": len(df), "documents": len(corpus), "chunking": chunking.strategy}
            yield dg.Output(df, metadata=meta)
            yield from chunk_check_results(df)

        @dg.asset(
            key=[name, "index"],
            ins={"chunks": dg.AssetIn([name, "chunks"])},
            description=f"The {system.retriever} index of {name}.",
            **common,
        )
        def index(
            context: dg.AssetExecutionContext, settings: Settings, chunks: pd.DataFrame
        ) -> dg.MaterializeResult:
            directory = settings.index_dir(name, context.partition_key)
            stats = systems.build_index(
                system, chunks, directory, embeddings_dir=settings.storage / "embeddings"
            )
            context.log.info(f"{name} index for {context.partition_key}: {stats}")
            return dg.MaterializeResult(metadata={**stats, "path": str(directory)})

        out += [chunks, index]

    ins = {"queries": dg.AssetIn("queries"), "qrels": dg.AssetIn("qrels")}
    if system.is_fusion:
        ins |= {f"member_{m}": dg.AssetIn([m, "run"]) for m in system.members}

    @dg.asset(
        key=[name, "run"],
        ins=ins,
        deps=[dg.AssetKey([name, "index"])] if system.needs_index else [],
        description=f"Top-k results of {name} per query, with per-query latency.",
        kinds={"parquet"},
        **common,
    )
    def run(context: dg.AssetExecutionContext, settings: Settings, **inputs) -> pd.DataFrame:
        dataset = context.partition_key
        queries = loaders.judged_queries(inputs["queries"], inputs["qrels"], settings.split)
        started = time.perf_counter()
        if system.is_fusion:
            result = systems.fuse(system, {m: inputs[f"member_{m}"] for m in system.members})
        elif system.retriever == "run_file":
            result = systems.run_external_file(system, base_dir=settings.data)
            result = result[result["query_id"].isin(queries["query_id"])]
        else:
            retriever = (
                systems.open_retriever(system, settings.index_dir(name, dataset))
                if system.needs_index
                else systems.open_external(system, base_dir=settings.data)
            )
            result = execute(
                retriever.search,
                queries,
                settings.top_k,
                concurrency=getattr(system, "concurrency", 1),
            )
        seconds = time.perf_counter() - started
        hits = result[result["doc_id"].notna()]
        context.add_output_metadata(
            {
                "queries": int(result["query_id"].nunique()),
                "rows": len(hits),
                "seconds": round(seconds, 3),
                "fingerprint": fingerprint,
            }
        )
        return tables.conform(result, tables.RUN).to_pandas()

    @dg.asset(
        key=[name, "metrics"],
        ins={
            "run": dg.AssetIn([name, "run"]),
            "qrels": dg.AssetIn("qrels"),
            "queries": dg.AssetIn("queries"),
            "corpus": dg.AssetIn("corpus"),
        },
        description=f"Per-query measures of {name}; means, breakdowns and latency in DuckDB.",
        kinds={"duckdb", "parquet"},
        pool="duckdb_write",
        **common,
    )
    def metrics(
        context: dg.AssetExecutionContext,
        settings: Settings,
        run: pd.DataFrame,
        qrels: pd.DataFrame,
        queries: pd.DataFrame,
        corpus: pd.DataFrame,
    ) -> pd.DataFrame:
        dataset, split = context.partition_key, settings.split
        reference = reference_of(settings, dataset)
        judged = qrels[qrels["split"] == split]
        results = measure_run(
            run,
            judged,
            queries,
            chunk_level=_chunk_level(system, catalog, reference),
            ignore_identical_ids=beir.ignores_identical_ids(dataset),
        )
        created = datetime.now(UTC)
        run_id = f"{created:%Y%m%dT%H%M%S%fZ}-{dataset}-{name}"
        keys = dict(run_id=run_id, dataset=dataset, split=split, system=name)
        tables_out = {
            "run_metrics": results.means.assign(**keys, created_at=created),
            "query_metrics": results.per_query.assign(**keys),
            "group_metrics": results.groups.assign(**keys),
            "latency": results.latency.assign(**keys),
        }
        settings.warehouse.record_run(
            dict(
                **keys,
                fingerprint=fingerprint,
                level=results.level,
                k=settings.top_k,
                n_queries=int(results.per_query["query_id"].nunique()),
                dagster_run_id=context.run.run_id,
                created_at=created,
                config=json.dumps(_config(system, reference), sort_keys=True),
            ),
            tables_out,
        )
        for table, df in tables_out.items():
            write_parquet(
                df,
                settings.storage
                / "tables"
                / table
                / f"dataset={dataset}"
                / f"system={name}"
                / f"{run_id}.parquet",
            )
        quality = quality_report(results.per_query, queries)
        coverage = qrels_coverage(judged, corpus["doc_id"], queries["query_id"])
        quality_md = quality.to_markdown(f"{dataset} / {name} ({results.level} level)")
        quality_md += _coverage_text(coverage, results.identical_ids_dropped)
        quality_dir = settings.reports_dir / "quality" / dataset / name
        write_text(quality_dir / f"{run_id}.json", quality.model_dump_json(indent=2) + "\n")
        write_text(quality_dir / f"{run_id}.md", quality_md)
        means = dict(zip(results.means["measure"], results.means["value"], strict=True))
        context.log.info(
            f"{dataset}/{name} ({results.level} level): "
            + ", ".join(f"{m}={v:.4f}" for m, v in means.items())
        )
        context.add_output_metadata(
            {
                "run_id": run_id,
                "level": results.level,
                "quality_report": dg.MetadataValue.md(quality_md),
                "means_95ci": dg.MetadataValue.md(_means_table(results.means)),
                "identical_ids_dropped": results.identical_ids_dropped,
                "qrels_missing_documents": coverage.missing_documents,
                "qrels_missing_queries": coverage.missing_queries,
                **{m: round_metric(v) for m, v in means.items()},
            }
        )
        return results.per_query.assign(run_id=run_id)

    return [*out, run, metrics]
