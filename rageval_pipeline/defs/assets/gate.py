"""The release gate: check a dataset's evaluated runs against thresholds and baselines, and
write its reports.

The gate is partitioned by dataset like the assets it checks, and so is its blocking ERROR check:
the asset and check pages show each dataset's latest verdict. It reads the warehouse rather than
loading upstream partitions, so materializing it alone recomputes nothing. It writes its reports
without figures (the gate step imports no matplotlib on a PASS): the next step, `report_figures`
(defs/assets/figures.py), draws them. A failed verdict ends the step with a `dg.Failure` whose
description is the verdict line (`dagster job execute` exits non-zero and shows that line
instead of Dagster's `DagsterAssetCheckFailedError`), after the step has drawn the figures
itself: Dagster skips every step after a failed one, and a blocked release's report is the one
people read most.
"""

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core import report
from rageval_pipeline.core.gate import (
    INTEGRITY_RATES,
    GatePolicy,
    RunSummary,
    Verdict,
    decide,
    decide_validation,
    load_baselines,
)
from rageval_pipeline.core.history import experiments
from rageval_pipeline.core.history.summaries import history, select_runs, summaries
from rageval_pipeline.core.report.validation import validation_report
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.storage.location import read_parquet
from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.chunking import CHUNK_METADATA, integrity
from rageval_pipeline.core.systems import SystemConfig
from rageval_pipeline.defs.assets.chunked import chunked
from rageval_pipeline.defs.assets.figures import draw_into
from rageval_pipeline.defs.checks import measured_integrity
from rageval_pipeline.defs.failures import one_line_errors, refusal
from rageval_pipeline.defs.job_summary import verdict_line
from rageval_pipeline.defs.partitions import partitioned_check
from rageval_pipeline.defs.policy import GatePolicyResource
from rageval_pipeline.defs.resources import (
    Settings,
    WarehouseResource,
    stored_path,
    write_pool,
)

GATE_CHECK = "verdict_passes"


def _asset_table(
    settings: Settings, *key: str, columns: list[str] | None = None
) -> pd.DataFrame | None:
    """An upstream asset's stored partition (the last part of `key`), if materialized."""
    path = stored_path(settings.storage, key[:-1], key[-1])
    return read_parquet(path, columns=columns).to_pandas() if path.is_file() else None


def texts_beside_ids(
    settings: Settings,
    dataset: str,
    ids: set[str],
    runs: list[RunSummary],
    systems: Mapping[str, SystemConfig],
) -> report.ReportTexts:
    """What the report shows beside ids: query texts, and snippets of the listed documents and
    (for a suite judged at chunk level) of its reference chunking's chunks: the fresh stored
    chunks of a run's system that chunks so, else the corpus chunked once in this process."""
    queries = _asset_table(settings, "queries", dataset, columns=["query_id", "text"])
    corpus = _asset_table(settings, "corpus", dataset, columns=["doc_id", "text"])
    if queries is None or corpus is None:
        return report.ReportTexts()
    texts = report.report_texts(dataset, queries, corpus, ids=ids)
    reference = settings.partition(dataset).reference
    if reference is not None:
        names = dict.fromkeys(run.system for run in runs if run.dataset == dataset)
        evaluated = [systems[name] for name in names if name in systems]
        stored = settings.stored("corpus", partition=dataset)
        chunks = chunked(settings, dataset, stored, reference, reference, *evaluated)
        chunk_texts = report.report_texts(dataset, queries, chunks, target_id="chunk_id", ids=ids)
        texts = texts.merged(chunk_texts)
    return texts


def _write_validation_reports(
    settings: Settings,
    run_summaries: list[RunSummary],
    policy: GatePolicy,
    stamp: datetime,
    measured: dict[str, tuple[float, float]],
) -> None:
    """The validation report (report_YYYYMMDD_HHMMSS.json) of each run, beside the gate reports,
    judged by the policy's `validation` rules; the chunks' integrity as `measured` in this run, else
    measured on the stored chunks."""
    queries: dict[str, pd.DataFrame | None] = {}
    for summary in run_summaries:
        if summary.dataset not in queries:
            queries[summary.dataset] = _asset_table(
                settings, "queries", summary.dataset, columns=["query_id", "text", "query_type"]
            )
        about: dict[str, dict] = {}
        if (table := queries[summary.dataset]) is not None:
            fields = table[table["query_id"].isin(list(summary.per_query))].astype(object)
            fields = fields.where(fields.notna(), None)  # a missing query type is None, not NaN
            about = (
                fields.drop_duplicates("query_id", keep="last")
                .set_index("query_id")
                .to_dict("index")
            )
        rates = measured.get(summary.system)
        if rates is None:
            chunks = _asset_table(
                settings, summary.system, "chunks", summary.dataset, columns=list(CHUNK_METADATA)
            )
            rates = integrity(chunks) if chunks is not None else None
        named = dict(zip(INTEGRITY_RATES, rates, strict=True)) if rates is not None else None
        criteria = decide_validation(summary, policy, integrity=named)
        report = validation_report(summary, about, criteria, timestamp=stamp, integrity=named)
        folder = settings.reports_dir / "validation" / summary.dataset / summary.system
        write_text(folder / f"report_{stamp:%Y%m%d_%H%M%S}.json", report.model_dump_json(indent=2))


def build_gate_asset(
    systems: Mapping[str, SystemConfig], policy: Path, datasets: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    """The gate over the metrics of `systems` (the catalog by name)."""

    @dg.asset(
        deps=[dg.AssetKey([name, "metrics"]) for name in systems],
        partitions_def=datasets,
        group_name="gate",
        # The verdict's code is the policy: the gate shows stale when gate.yaml changes.
        code_version=content_key(policy.read_text(encoding="utf-8"))[:16]
        if policy.is_file()
        else None,
        kinds={"duckdb"},
        pool=write_pool(),
        check_specs=[
            partitioned_check(
                GATE_CHECK,
                asset="gate",
                partitions_def=datasets,
                blocking=True,
                description="Fails (ERROR) when any blocking gate check of the dataset fails.",
            )
        ],
    )
    @one_line_errors
    def gate(
        context: dg.AssetExecutionContext,
        settings: Settings,
        warehouse: WarehouseResource,
        policy: GatePolicyResource,
    ) -> Iterator:
        """Verdict on this Dagster run's evaluations of the dataset (or, materialized alone, on
        the latest evaluation of every system of the dataset), with JSON, Markdown and HTML
        reports in `reports/<dataset>/<time>/` and `reports/<dataset>/latest/`."""
        yield from judge(context, (settings, warehouse.warehouse, policy.policy), systems)

    return gate


def judge(
    context: dg.AssetExecutionContext,
    resources: tuple[Settings, BaseWarehouse, GatePolicy],
    systems: Mapping[str, SystemConfig],
) -> Iterator:
    """The gate step: decide, write the reports (without figures), record the verdict and the
    experiments, and yield the asset's result and its check; a blocked verdict draws the
    reports' figures, then ends the step with its line."""
    settings, store, policy = resources
    partition = settings.dataset(context)
    dataset = partition.name
    loaders.require_judged(partition.folder)
    runs, scope, run_summaries, past = _evaluations(store, context.run.run_id, dataset)
    baselines = load_baselines(settings.baselines)
    verdict = decide(run_summaries, baselines, policy)
    stamp = datetime.now(UTC)
    # The verdict's row first (unfinished), then the reports, then `finish`: a gate killed
    # anywhere leaves no report that the warehouse does not hold (docs/deploy.md).
    logged, gate_id = _record(store, (verdict, run_summaries, baselines), context, stamp)
    ids = report.listed_ids(run_summaries, baselines.values()).get(dataset, set())
    texts = texts_beside_ids(settings, dataset, ids, run_summaries, systems)
    folders = (
        settings.reports_dir / dataset / f"{stamp:%Y%m%dT%H%M%SZ}",
        settings.reports_dir / dataset / "latest",
    )
    paths = report.write_reports(  # no figures: drawn after the verdict, off its path
        report.build_report(verdict, run_summaries, baselines, past, texts), *folders
    )
    report.write_index(settings.reports_dir)
    _write_validation_reports(settings, run_summaries, policy, stamp, measured_integrity(context))
    # After the record's block: the lake's reads see its commit, made as the block ends.
    experiments.export(experiments.load(store), settings.reports_dir / "experiments.json")
    store.finish(gate_results=gate_id)  # last write: a gate killed before it is unfinished
    for message in (c.message for c in verdict.failures):
        context.log.error(message)
    for check in verdict.inconclusive:
        if not check.blocking:  # a blocking one is among the failures above
            context.log.warning(check.message)
    context.log.info(f"reports ({scope}): {paths['html'].parent}")
    yield from _results(verdict, (runs, scope, logged, paths))
    line = verdict_line(dataset, verdict)
    if not verdict.passed:
        # Dagster skips report_figures after this step fails: the figures are drawn here.
        draw_into(context, *folders)
        # Instead of Dagster's DagsterAssetCheckFailedError (printed twice with its trace and
        # no verdict): the failed check is recorded above, the step fails with the line.
        raise refusal(line)
    context.log.info(line)


def _evaluations(store: BaseWarehouse, dagster_run_id: str, dataset: str) -> tuple:
    """(runs, scope, their summaries, the dataset's history): this Dagster run's evaluations
    of the dataset, else the latest evaluation of each system."""
    with store.read():  # one connection for every read
        runs = select_runs(store, dagster_run_id=dagster_run_id, dataset=dataset)
        scope = "this run"
        if runs.empty:
            runs, scope = select_runs(store, dataset=dataset), "latest evaluations"
        return runs, scope, summaries(store, runs), history(store, dataset)


def _record(
    store: BaseWarehouse, decided: tuple, context: dg.AssetExecutionContext, stamp: datetime
) -> tuple[list, str]:
    """The verdict's row (unfinished until `finish`) and its experiments in the warehouse:
    (the experiments logged, the gate's id). `decided`: the verdict, the run summaries, the
    baselines."""
    verdict, run_summaries, baselines = decided
    description = context.run.tags.get(experiments.DESCRIPTION_TAG)
    with store.connect():  # DuckDB: one turn of the write lock; the lake: one commit
        logged = experiments.record(
            store, verdict, run_summaries, baselines, description=description, created_at=stamp
        )
        gate_id = f"{stamp:%Y%m%dT%H%M%S%fZ}"
        store.record_gate(
            dict(
                gate_id=gate_id,
                dagster_run_id=context.run.run_id,
                created_at=stamp,
                passed=verdict.passed,
                categories=",".join(verdict.categories),
                summary=verdict.summary,
                report_json=report.to_json(verdict),
            )
        )
    return logged, gate_id


def _results(verdict: Verdict, about: tuple) -> Iterator:
    """The asset's metadata and its check's result. `about`: the runs judged, the scope, the
    experiments logged and the reports' paths."""
    runs, scope, logged, paths = about
    yield dg.MaterializeResult(
        metadata={
            "passed": verdict.passed,
            "scope": scope,
            "runs": ", ".join(runs["run_id"]),
            "categories": ", ".join(verdict.categories) or "none",
            "experiments": ", ".join(f"{e.id} {e.system} {e.verdict}" for e in logged),
            "report_html": dg.MetadataValue.path(str(paths["html"])),
            "report_md": dg.MetadataValue.path(str(paths["markdown"])),
        }
    )
    yield dg.AssetCheckResult(
        check_name=GATE_CHECK,
        passed=verdict.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        # The verdict, a line per run (what it was judged on and against) and the reports, as
        # `scripts/evaluate` prints them: what a reader of the check needs first. The UI
        # shows the description as one paragraph, so the lines are joined visibly.
        description=" · ".join(
            line.strip()
            for line in report.short_summary(verdict, paths["html"].parent).splitlines()
        ).removeprefix("Gate: "),
        metadata={
            "failures": dg.MetadataValue.json([c.message for c in verdict.failures]),
            "categories (failures and warnings)": json.dumps(verdict.categories),
            "inconclusive": dg.MetadataValue.json([c.message for c in verdict.inconclusive]),
            **report.plotted_values(verdict),
        },
    )
