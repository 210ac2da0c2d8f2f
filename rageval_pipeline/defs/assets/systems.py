"""One asset chain per configured retrieval system, built from data/systems.yaml.

Indexed systems (bm25, dense): `<system>/chunks` -> `<system>/index` -> `<system>/run` ->
`<system>/metrics`; fusion systems read their members' runs (so the lineage graph shows what is
fused); the user's own systems (run file, HTTP, Python entry point) start at `<system>/run`.
A system is an asset-key prefix rather than a partition dimension because fusion depends on
other systems' runs of the same dataset, which prefixes express directly.

Each system's assets carry a code version from its configuration's fingerprint, so the UI shows
them stale when the configuration changes. `chunks`, `index`, `run` and `metrics` reuse their
last result when its content key (code version + inputs' contents) is unchanged (`reused: true`
in the metadata) unless `settings.force` is set. Their upstream tables are `deps` looked up as
`StoredTable`s: the key is a digest of the stored files, and the rows are read only when the
stage recomputes (so a warm job loads no table, and logs no input events, to find it can reuse).
A reused `metrics` adds no second copy of the same evaluation to the history: it notes in the
warehouse that this job reused the stored run, which the gate (run on every job) then checks.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core.gate import Baseline, load_policy
from rageval_pipeline.core.gate.changes import chunking_changes, rerun_reason
from rageval_pipeline.core.history.summaries import rerun
from rageval_pipeline.core.io import beir, tables
from rageval_pipeline.core.measures.defaults import BUDGETS, DEFAULT_MEASURES, budget_measures
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.results.store import (
    METRICS_VERSION,
    RunRecord,
    RunResults,
    measure_run,
    query_digests,
    store_results,
    suite_digest,
)
from rageval_pipeline.core.retrieval.machine import machine_digest
from rageval_pipeline.core.storage.reuse import FrameCache, content_key, read_stamp
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.conventions import conventions_note, qrels_coverage
from rageval_pipeline.core.suites.derived import suite_evidence
from rageval_pipeline.core.systems import RunInputs, SystemConfig
from rageval_pipeline.defs.assets.beside import (
    baseline_of,
    baseline_system,
    open_beside,
    run_beside,
)
from rageval_pipeline.defs.assets.chunked import chunks_version, from_storage, stale_chunks
from rageval_pipeline.defs.assets.companion import Companion, companion, split_run
from rageval_pipeline.defs.assets.indexes import index_assets, reference_of
from rageval_pipeline.defs.failures import one_line_errors
from rageval_pipeline.defs.resources import (
    CONTENT_KEY,
    Dataset,
    Settings,
    StoredTable,
    WarehouseResource,
    stamp_path,
    write_pool,
)

# Bump when the Dagster layer changes what a stage produces beyond the system's configuration
# (the chunks' version is chunked.CHUNKS_VERSION).
RUN_VERSION = "2"  # 2: the baseline configuration timed beside the system


def _means_table(means: pd.DataFrame) -> str:
    """Every mean with its 95% bootstrap interval, as a Markdown table for the UI."""
    rows = [
        f"| {r.measure} | {round_metric(r.value)} | [{round_metric(r.ci_low)}, "
        f"{round_metric(r.ci_high)}] |"
        for r in means.itertuples(index=False)
    ]
    return "\n".join(["| measure | mean | 95% CI |", "| --- | --- | --- |", *rows])


def _metrics_metadata(dataset: str, record: dict, reused: bool, key: str) -> dict:
    """The metrics asset's metadata from its record (see `metrics`), each mean as a float for
    the UI's plots. The UI plots every number under its label across all partitions (by time in
    "Events"), so each number's label starts with the dataset: a plot never mixes datasets."""
    markdown = {"quality_report", "means_95ci"}
    meta = {k: dg.MetadataValue.md(v) if k in markdown else v for k, v in record.items()}
    means = {m: round_metric(v) for m, v in meta.pop("means").items()}
    counted = {k: v for k, v in meta.items() if type(v) is int}  # bool is an int, not counted
    plotted = {f"{dataset}/{label}": value for label, value in (means | counted).items()}
    text = {k: v for k, v in meta.items() if k not in counted}
    return text | plotted | {"reused": reused, CONTENT_KEY: key}


def code_versions(system: SystemConfig) -> dict[str, str]:
    """The code version of each of the system's assets: its fingerprint, with the version of
    the code behind each stage (chunks depend on the chunking only)."""
    fingerprint = system.fingerprint()
    versions = {
        "run": f"{fingerprint}.{RUN_VERSION}",
        "metrics": f"{fingerprint}.{METRICS_VERSION}",
    }
    if system.indexed:
        versions["chunks"] = chunks_version(system)
        versions["index"] = f"{fingerprint}.{system.index_version}"
    return versions


def build_system_assets(
    system: SystemConfig, datasets: dg.PartitionsDefinition
) -> list[dg.AssetsDefinition]:
    name = system.name
    versions = code_versions(system)
    common = dict(partitions_def=datasets, group_name=f"system_{name}")
    fingerprint = system.fingerprint()
    out: list[dg.AssetsDefinition] = []

    if system.indexed:
        out += index_assets(system, versions, datasets)

    # What a run is made from, by input name: the asset key of each stored table.
    sources = {"queries": ("queries",), "qrels": ("qrels",)}
    sources |= {f"member_{m}": (m, "run") for m in system.member_names}
    if system.reads_corpus:
        sources["corpus"] = ("corpus",)

    @dg.asset(
        key=[name, "run"],
        deps=[*(dg.AssetKey(list(k)) for k in sources.values())]
        + ([dg.AssetKey([name, "index"])] if system.indexed else []),
        description=f"Top-k results of {name} per query, with per-query latency.",
        kinds={"parquet"},
        code_version=versions["run"],
        **common,
    )
    @one_line_errors
    def run(context: dg.AssetExecutionContext, settings: Settings) -> pd.DataFrame:
        partition = settings.dataset(context)
        dataset, reference = partition.name, reference_of(partition)
        inputs = {n: settings.stored(*k, partition=dataset) for n, k in sources.items()}
        index_dir = settings.index_dir(name, dataset)
        baseline = baseline_of(system, settings, dataset)
        beside = baseline_system(system, settings, dataset, baseline)
        key = _run_key(system, versions["run"], settings, index_dir, inputs, beside)
        extra = companion(settings, dataset)  # its queries are run too, for PPI
        if key is not None and extra is not None:
            key = content_key(key, extra.key)
        cache = FrameCache(settings.cache_dir(name, "run", dataset))
        result = None if settings.force or key is None else cache.get(key)
        reused = result is not None
        if result is None:
            queries, qrels = inputs["queries"].frame, inputs["qrels"].frame
            judged = loaders.judged_queries(queries, qrels, settings.split)
            if extra is not None:
                judged = pd.concat([judged, extra.queries], ignore_index=True)
            corpus = inputs["corpus"].frame if system.reads_corpus else None
            # A chunking change re-runs the baseline's configuration in the metrics step: its
            # whole index is built here once, to time it and then read its hits.
            whole = baseline is not None and bool(
                chunking_changes(baseline.config, system.recorded_config(reference))
            )
            run_inputs = RunInputs(
                queries=judged,
                top_k=settings.depth,
                index_dir=index_dir,
                base_dir=settings.data,
                member_runs={m: inputs[f"member_{m}"].frame for m in system.member_names},
                corpus=corpus,
                reference=reference,
                stored_chunks=from_storage(settings, dataset, inputs["corpus"], reference, system)
                if system.reads_corpus
                else None,
                embeddings_dir=settings.storage / "embeddings",
                baseline=open_beside(
                    context, settings, system, beside, index_dir, timing=not whole
                ),
            )
            result = tables.conform(system.produce_run(run_inputs), tables.RUN).to_pandas()
            if key is not None:
                cache.put(key, result)
        hits = result[result["doc_id"].notna()]
        context.add_output_metadata(
            {
                "queries": int(result["query_id"].nunique()),
                "rows": len(hits),
                "fingerprint": fingerprint,
                "reused": reused,
                **({CONTENT_KEY: key} if key is not None else {}),
            }
        )
        return result

    @dg.asset(
        key=[name, "metrics"],
        deps=[dg.AssetKey([name, "run"]), "qrels", "queries", "corpus"],
        description=f"Per-query measures of {name}; means, breakdowns and latency in DuckDB.",
        kinds={"duckdb", "parquet"},
        pool=write_pool(),
        code_version=versions["metrics"],
        **common,
    )
    @one_line_errors
    def metrics(
        context: dg.AssetExecutionContext,
        settings: Settings,
        warehouse: WarehouseResource,
    ) -> dg.Output:
        partition = settings.dataset(context)
        dataset = partition.name
        run = settings.stored(name, "run", partition=dataset)
        qrels, queries, corpus = (
            settings.stored(t, partition=dataset) for t in ("qrels", "queries", "corpus")
        )
        reference = reference_of(partition)
        baseline = baseline_of(system, settings, dataset)
        measures = _measures(settings, dataset)
        extra = companion(settings, dataset)
        key = content_key(
            versions["metrics"],
            measures,
            settings.depth,
            settings.split,
            system.recorded_config(reference),
            system.chunk_level(reference),
            beir.ignores_identical_ids(dataset),
            [table.key for table in (run, qrels, queries, corpus)],
            # Whether the baseline's configuration is re-run (changes.rerun_reason).
            None if baseline is None else [baseline.suite, baseline.config, *baseline.measures],
            None if extra is None else extra.key,
        )
        cache = FrameCache(settings.cache_dir(name, "metrics", dataset))
        per_query = None if settings.force else cache.get(key)
        record = None if per_query is None else cache.record(key)
        # The stored run is judged again by this job's gate; history keeps one row for it.
        reused = record is not None and warehouse.warehouse.record_reuse(
            record["run_id"], context.run.run_id, datetime.now(UTC)
        )
        if not reused:
            judged = qrels.frame[qrels.frame["split"] == settings.split]
            tables_ = (run.frame, judged, queries.frame, corpus)
            per_query, record = _measure(
                context, settings, warehouse, partition, *tables_, baseline, measures, extra
            )
            cache.put(key, per_query, record)
        if stale := stale_chunks(settings, dataset, corpus, reference, system):
            context.log.warning(
                f"{dataset}/{name}: the run was made from chunks of an older corpus"
                f" ({', '.join(stale)}); materialize {name}'s chain (chunks, index, run) to"
                " measure the documents as ingested now"
            )
        context.log.info(
            f"{dataset}/{name} ({record['level']} level"
            + (f", reused {record['run_id']}): " if reused else "): ")
            + ", ".join(f"{m}={v:.4f}" for m, v in record["means"].items())
        )
        metadata = _metrics_metadata(dataset, record, reused, key)
        if stale:  # the UI's metadata says it beside the numbers it qualifies
            metadata["older_corpus_chunks"] = ", ".join(stale)
        return dg.Output(per_query, metadata=metadata)

    def _measure(
        context: dg.AssetExecutionContext,
        settings: Settings,
        warehouse: WarehouseResource,
        partition: Dataset,
        run: pd.DataFrame,
        judged: pd.DataFrame,
        queries: pd.DataFrame,
        stored_corpus: StoredTable,
        baseline: Baseline | None,
        measures: tuple[str, ...],
        extra: Companion | None,
    ) -> tuple[pd.DataFrame, dict]:
        """Evaluate the run and store it: (per-query table with its run_id, metadata record).
        When the stored baseline's numbers do not serve (`changes.rerun_reason`: the suite or
        the chunking changed, or it lacks a measure), the baseline's configuration (a built-in
        one) is run and measured on the same queries too: what the gate then checks the run
        against, query by query. With a companion set, the run's rows of its queries are
        measured apart, for PPI."""
        dataset, reference = partition.name, reference_of(partition)
        corpus = stored_corpus.frame
        spans = loaders.load_part(partition.folder, "spans", dataset=dataset)
        spans = spans[spans["split"] == settings.split]

        # Read once in the step: the run's evidence, the baseline's, qrels coverage. Stored
        # chunks are looked up under the configured system's (and its members') names only:
        # the baseline's configuration beside it carries the same name.
        chunks_by = from_storage(settings, dataset, stored_corpus, reference, system)

        def evidence_chunks(of: SystemConfig, own: bool) -> pd.DataFrame | None:
            chunking = reference if own else of.run_chunking(reference)
            return None if chunking is None else chunks_by(chunking)

        def measured(produced: pd.DataFrame, of: SystemConfig) -> RunResults:
            # An outside system returning the suite's chunk ids is scored as chunked by it.
            own = of.returns_suite_chunks(produced, reference, corpus)
            return measure_run(
                produced,
                judged,
                queries,
                chunk_level=own or of.chunk_level(reference),
                measures=measures,
                ignore_identical_ids=beir.ignores_identical_ids(dataset),
                evidence=suite_evidence(spans, corpus, lambda: evidence_chunks(of, own)),
            )

        rows = split_run(run, extra)
        results = measured(rows.suite, system)
        if (ppi := rows.ppi(system.chunk_level(reference), context.log.warning)) is not None:
            results = results._replace(ppi=ppi)
        suite = suite_digest(judged, queries, corpus["doc_id"])
        beside = baseline_system(system, settings, dataset, baseline)
        config, rerun_json = system.recorded_config(reference), None
        measured_names = results.means["measure"]
        why = None if beside is None else rerun_reason(config, suite, measured_names, baseline)
        if why is not None:
            context.log.info(f"{name}: {why}; re-running the baseline's configuration beside it")
            again = run_beside(context, settings, system, beside, judged, queries)
            rerun_json = rerun(measured(again, beside), why).model_dump_json()
        record = RunRecord(
            dataset=dataset,
            split=settings.split,
            system=name,
            fingerprint=fingerprint,
            k=settings.depth,
            config=config,
            created_at=datetime.now(UTC),
            dagster_run_id=context.run.run_id,
            suite=suite,
            machine=machine_digest(),
            baseline_rerun=rerun_json,
            human_sample=None if ppi is None else rows.sample_json,
            query_digests=json.dumps(query_digests(judged, queries, spans), sort_keys=True),
        )
        coverage = qrels_coverage(
            judged,
            corpus,
            queries["query_id"],
            level=results.level,
            reference=reference,
            stored_chunks=chunks_by,
        )
        notes = conventions_note(coverage, results.identical_ids_dropped)
        stored = store_results(
            settings.storage, warehouse.warehouse, record, results, queries, notes=notes
        )
        return results.per_query.assign(run_id=stored.run_id), {
            "run_id": stored.run_id,
            "level": results.level,
            "quality_report": stored.quality_markdown,
            "means_95ci": _means_table(results.means),
            "identical_ids_dropped": results.identical_ids_dropped,
            "qrels_missing_targets": coverage.missing_targets,
            "qrels_missing_queries": coverage.missing_queries,
            "means": stored.means,
        }

    return [*out, run, metrics]


def _measures(settings: Settings, dataset: str) -> tuple[str, ...]:
    """DEFAULT_MEASURES and the evidence measures at the token budgets of the dataset's gate
    policy, which judges a chunking change by them (docs/gate.md)."""
    path = settings.data / "gate.yaml"
    budgets = load_policy(path).rules_for(dataset).budgets if path.exists() else BUDGETS
    return tuple(dict.fromkeys((*DEFAULT_MEASURES, *budget_measures(budgets))))


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
