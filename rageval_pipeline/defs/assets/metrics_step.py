"""The `<system>/metrics` step: the run measured against the suite (and its companion set's rows
apart, for PPI), stored in the warehouse, or a stored evaluation reused while its content key is
unchanged (docs/architecture.md, "A system's config, step by step")."""

import json
from datetime import UTC, datetime

import dagster as dg
import pandas as pd

from rageval_pipeline.core.gate import Baseline, GatePolicy
from rageval_pipeline.core.gate.changes import rerun_reason
from rageval_pipeline.core.history.summaries import rerun
from rageval_pipeline.core.io import beir
from rageval_pipeline.core.measures.defaults import DEFAULT_MEASURES, budget_measures
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.results.store import (
    RunRecord,
    RunResults,
    measure_run,
    query_digests,
    store_results,
    suite_digest,
)
from rageval_pipeline.core.retrieval.machine import machine_digest
from rageval_pipeline.core.storage.reuse import FrameCache, content_key
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.conventions import conventions_note, qrels_coverage
from rageval_pipeline.core.suites.derived import suite_evidence
from rageval_pipeline.core.systems import SystemConfig
from rageval_pipeline.defs.assets.beside import baseline_of, baseline_system, run_beside
from rageval_pipeline.defs.assets.chunked import from_storage, stale_chunks
from rageval_pipeline.defs.assets.companion import Companion, companion, split_run
from rageval_pipeline.defs.resources import (
    CONTENT_KEY,
    Dataset,
    Settings,
    StoredTable,
    WarehouseResource,
)


def measure_metrics(
    context: dg.AssetExecutionContext,
    resources: tuple[Settings, WarehouseResource, GatePolicy],
    system: SystemConfig,
    version: str,
) -> dg.Output:
    """The per-query table of the system's run, measured now or reused, with its metadata."""
    settings, warehouse, policy = resources
    partition = settings.dataset(context)
    dataset, name = partition.name, system.name
    run = settings.stored(name, "run", partition=dataset)
    qrels, queries, corpus = (
        settings.stored(t, partition=dataset) for t in ("qrels", "queries", "corpus")
    )
    baseline = baseline_of(system, settings, dataset)
    measures = _measures(policy, dataset)
    extra = companion(settings, dataset)
    key = _metrics_key(
        version,
        settings,
        partition,
        system,
        (run, qrels, queries, corpus),
        baseline,
        measures,
        extra,
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
        measurer = Measurer(settings, partition, system, corpus, judged, queries.frame, measures)
        per_query, record = _measure(
            context, settings, warehouse, measurer, run.frame, baseline, extra
        )
        cache.put(key, per_query, record)
    stale = stale_chunks(settings, dataset, corpus, partition.reference, system)
    if stale:
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


def _measures(policy: GatePolicy, dataset: str) -> tuple[str, ...]:
    """DEFAULT_MEASURES and the evidence measures at the token budgets of the dataset's gate
    policy, which judges a chunking change by them (docs/gate.md)."""
    budgets = policy.rules_for(dataset).budgets
    return tuple(dict.fromkeys((*DEFAULT_MEASURES, *budget_measures(budgets))))


def _metrics_key(
    version: str,
    settings: Settings,
    partition: Dataset,
    system: SystemConfig,
    stored: tuple[StoredTable, ...],
    baseline: Baseline | None,
    measures: tuple[str, ...],
    extra: Companion | None,
) -> str:
    """What a stored evaluation was measured from: a change to any of it measures again."""
    reference = partition.reference
    return content_key(
        version,
        measures,
        settings.depth,
        settings.split,
        system.recorded_config(reference),
        system.chunk_level(reference),
        beir.ignores_identical_ids(partition.name),
        [table.key for table in stored],  # run, qrels, queries, corpus
        # Whether the baseline's configuration is re-run (changes.rerun_reason).
        None if baseline is None else [baseline.suite, baseline.config, *baseline.measures],
        None if extra is None else extra.key,
    )


class Measurer:
    """Measures a run of the system, or of the baseline's configuration beside it, against the
    suite: the evidence spans and stored chunks read once in the step."""

    def __init__(
        self,
        settings: Settings,
        partition: Dataset,
        system: SystemConfig,
        stored_corpus: StoredTable,
        judged: pd.DataFrame,
        queries: pd.DataFrame,
        measures: tuple[str, ...],
    ) -> None:
        self.system, self.partition = system, partition
        self.dataset, self.reference = partition.name, partition.reference
        self.judged, self.queries, self.measures = judged, queries, measures
        self.corpus = stored_corpus.frame
        spans = loaders.load_part(partition.folder, "spans", dataset=partition.name)
        self.spans = spans[spans["split"] == settings.split]
        # Stored chunks are looked up under the configured system's (and its members') names
        # only: the baseline's configuration beside it carries the same name.
        self.chunks_by = from_storage(settings, self.dataset, stored_corpus, self.reference, system)

    def _evidence_chunks(self, of: SystemConfig, own: bool) -> pd.DataFrame | None:
        chunking = self.reference if own else of.run_chunking(self.reference)
        return None if chunking is None else self.chunks_by(chunking)

    def measure(self, produced: pd.DataFrame, of: SystemConfig) -> RunResults:
        # An outside system returning the suite's chunk ids is scored as chunked by it.
        own = of.returns_suite_chunks(produced, self.reference, self.corpus)
        return measure_run(
            produced,
            self.judged,
            self.queries,
            chunk_level=own or of.chunk_level(self.reference),
            measures=self.measures,
            ignore_identical_ids=beir.ignores_identical_ids(self.dataset),
            evidence=suite_evidence(
                self.spans, self.corpus, lambda: self._evidence_chunks(of, own)
            ),
        )


def _measure(
    context: dg.AssetExecutionContext,
    settings: Settings,
    warehouse: WarehouseResource,
    measurer: Measurer,
    run: pd.DataFrame,
    baseline: Baseline | None,
    extra: Companion | None,
) -> tuple[pd.DataFrame, dict]:
    """Evaluate the run and store it: (per-query table with its run_id, metadata record).
    When the stored baseline's numbers do not serve (`changes.rerun_reason`: the suite or the
    chunking changed, or it lacks a measure), the baseline's configuration (a built-in one) is
    run and measured on the same queries too: what the gate then checks the run against, query
    by query. With a companion set, the run's rows of its queries are measured apart, for PPI."""
    system = measurer.system
    reference, judged, queries = measurer.reference, measurer.judged, measurer.queries
    rows = split_run(run, extra)
    results = measurer.measure(rows.suite, system)
    if (ppi := rows.ppi(system.chunk_level(reference), context.log.warning)) is not None:
        results = results._replace(ppi=ppi)
    suite = suite_digest(judged, queries, measurer.corpus["doc_id"])
    beside = baseline_system(system, reference, baseline)
    config, rerun_json = system.recorded_config(reference), None
    why = (
        None if beside is None else rerun_reason(config, suite, results.means["measure"], baseline)
    )
    if why is not None:
        context.log.info(f"{system.name}: {why}; re-running the baseline's configuration beside it")
        again = run_beside(context, settings, measurer.partition, system, beside, judged, queries)
        rerun_json = rerun(measurer.measure(again, beside), why).model_dump_json()
    record = RunRecord(
        dataset=measurer.dataset,
        split=settings.split,
        system=system.name,
        fingerprint=system.fingerprint(),
        k=settings.depth,
        config=config,
        created_at=datetime.now(UTC),
        dagster_run_id=context.run.run_id,
        suite=suite,
        machine=machine_digest(),
        baseline_rerun=rerun_json,
        human_sample=None if ppi is None else rows.sample_json,
        query_digests=json.dumps(query_digests(judged, queries, measurer.spans), sort_keys=True),
    )
    return _stored(settings, warehouse, measurer, record, results)


def _stored(
    settings: Settings,
    warehouse: WarehouseResource,
    measurer: Measurer,
    record: RunRecord,
    results: RunResults,
) -> tuple[pd.DataFrame, dict]:
    """The evaluation stored, with its qrels coverage noted: (per-query table, record)."""
    coverage = qrels_coverage(
        measurer.judged,
        measurer.corpus,
        measurer.queries["query_id"],
        level=results.level,
        reference=measurer.reference,
        stored_chunks=measurer.chunks_by,
    )
    notes = conventions_note(coverage, results.identical_ids_dropped)
    stored = store_results(
        settings.storage, warehouse.warehouse, record, results, measurer.queries, notes=notes
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


def _means_table(means: pd.DataFrame) -> str:
    """Every mean with its 95% bootstrap interval, as a Markdown table for the UI."""
    rows = [
        f"| {r.measure} | {round_metric(r.value)} | [{round_metric(r.ci_low)}, "
        f"{round_metric(r.ci_high)}] |"
        for r in means.itertuples(index=False)
    ]
    return "\n".join(["| measure | mean | 95% CI |", "| --- | --- | --- |", *rows])


def _metrics_metadata(dataset: str, record: dict, reused: bool, key: str) -> dict:
    """The metrics asset's metadata from its record (see `_stored`), each mean as a float for
    the UI's plots. The UI plots every number under its label across all partitions (by time in
    "Events"), so each number's label starts with the dataset: a plot never mixes datasets."""
    markdown = {"quality_report", "means_95ci"}
    meta = {k: dg.MetadataValue.md(v) if k in markdown else v for k, v in record.items()}
    means = {m: round_metric(v) for m, v in meta.pop("means").items()}
    counted = {k: v for k, v in meta.items() if type(v) is int}  # bool is an int, not counted
    plotted = {f"{dataset}/{label}": value for label, value in (means | counted).items()}
    text = {k: v for k, v in meta.items() if k not in counted}
    return text | plotted | {"reused": reused, CONTENT_KEY: key}
