"""The release gate: judge evaluated runs against thresholds and baselines, write reports.

The gate is unpartitioned and reads the warehouse rather than loading upstream partitions, so
materializing it alone recomputes nothing. Its blocking ERROR check is what makes
`dagster job execute` exit non-zero when retrieval got worse.
"""

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core import experiments, report
from rageval_pipeline.core.chunking import CHUNK_METADATA, integrity
from rageval_pipeline.core.gate import RunSummary, judge, load_baselines, load_policy
from rageval_pipeline.core.report.seed003 import validation_report
from rageval_pipeline.core.reuse import content_key
from rageval_pipeline.core.storage import write_text
from rageval_pipeline.core.summaries import select_runs, summaries
from rageval_pipeline.dagster_defs.assets.systems import CHUNK_CHECKS
from rageval_pipeline.dagster_defs.resources import Settings, WarehouseResource, stored_path

GATE_CHECK = "verdict_passes"
PARTITION_TAG = "dagster/partition"  # the dataset of a partitioned job's run


def _asset_table(
    settings: Settings, *key: str, columns: list[str] | None = None
) -> pd.DataFrame | None:
    """An upstream asset's stored partition (the last part of `key`), if materialized."""
    path = stored_path(settings.storage, key[:-1], key[-1])
    return pd.read_parquet(path, columns=columns) if path.is_file() else None


def _measured_integrity(
    context: dg.AssetExecutionContext,
) -> dict[tuple[str, str], tuple[float, float]]:
    """(dataset, system) -> (metadata completeness, hash validity) that this run's
    `<system>/chunks` checks measured, so that the gate need not read and hash the chunks again.
    Those checks carry no partition: their dataset is the run's."""
    dataset = context.run.tags.get(PARTITION_TAG)
    if dataset is None:
        return {}
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    rates: dict[str, dict[str, float]] = {}
    for record in records:
        check = record.event_log_entry.dagster_event.event_specific_data
        key, rate = check.asset_key.path, CHUNK_CHECKS.get(check.check_name)
        if rate in check.metadata and len(key) == 2 and key[1] == "chunks":
            rates.setdefault(key[0], {})[check.check_name] = check.metadata[rate].value
    return {
        (dataset, system): (got["metadata_complete"], got["hashes_valid"])
        for system, got in rates.items()
        if got.keys() == CHUNK_CHECKS.keys()
    }


def _write_validation_reports(
    settings: Settings,
    judged: list[RunSummary],
    stamp: datetime,
    measured: dict[tuple[str, str], tuple[float, float]],
) -> None:
    """Seed 003's report_YYYYMMDD_HHMMSS.json of each run, beside the gate reports; the chunks'
    integrity as `measured` in this run, else measured on the stored chunks."""
    queries: dict[str, pd.DataFrame | None] = {}
    for summary in judged:
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
        rates = measured.get((summary.dataset, summary.system))
        if rates is None:
            chunks = _asset_table(
                settings, summary.system, "chunks", summary.dataset, columns=list(CHUNK_METADATA)
            )
            rates = integrity(chunks) if chunks is not None else None
        seed = validation_report(summary, about, timestamp=stamp, integrity=rates)
        folder = settings.reports_dir / "validation" / summary.dataset / summary.system
        write_text(folder / f"report_{stamp:%Y%m%d_%H%M%S}.json", seed.model_dump_json(indent=2))


def build_gate_asset(metrics_keys: Sequence[dg.AssetKey], policy: Path) -> dg.AssetsDefinition:
    @dg.asset(
        deps=list(metrics_keys),
        group_name="gate",
        # The verdict's code is the policy: the gate shows stale when gate.yaml changes.
        code_version=content_key(policy.read_text(encoding="utf-8"))[:16]
        if policy.is_file()
        else None,
        kinds={"duckdb"},
        pool="duckdb_write",
        check_specs=[
            dg.AssetCheckSpec(
                GATE_CHECK,
                asset="gate",
                blocking=True,
                description="Fails (ERROR) when any blocking gate check fails.",
            )
        ],
    )
    def gate(
        context: dg.AssetExecutionContext, settings: Settings, warehouse: WarehouseResource
    ) -> Iterator:
        """Verdict on this Dagster run's evaluations (or, materialized alone, on the latest
        evaluation of every dataset and system), with JSON, Markdown and HTML reports."""
        store = warehouse.warehouse
        with store.read():  # one connection for every read
            runs = select_runs(store, dagster_run_id=context.run.run_id)
            scope = "this run"
            if runs.empty:
                runs, scope = select_runs(store), "latest evaluations"
            judged = summaries(store, runs)
            datasets = sorted(set(runs["dataset"]))
            history = store.query(
                f"SELECT * FROM history WHERE dataset IN ({', '.join('?' * len(datasets))})",
                datasets,
            )
        baselines = load_baselines(settings.baselines)
        verdict = judge(judged, baselines, load_policy(settings.data / "gate.yaml"))
        stamp = datetime.now(UTC)
        folder = settings.reports_dir / f"{stamp:%Y%m%dT%H%M%SZ}"
        full = report.build_report(verdict, judged, baselines, history)
        latest, plots = settings.reports_dir / "latest", settings.storage / "cache" / "plots"
        paths = report.write_reports(full, folder, latest, plot_cache=plots)
        _write_validation_reports(settings, judged, stamp, _measured_integrity(context))
        with store.connect():  # one connection, one turn of the write lock, for every write
            logged = experiments.record(
                store,
                verdict,
                judged,
                baselines,
                description=context.run.tags.get(experiments.DESCRIPTION_TAG),
                created_at=stamp,
            )
            experiment_log = experiments.load(store)
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
        experiments.export(experiment_log, settings.reports_dir / "experiments.json")
        store.finish(gate_results=gate_id)  # last write: a gate killed before it is unfinished
        failures = [c.message for c in verdict.failures]
        log = context.log.info if verdict.passed else context.log.error
        log(f"gate {'PASS' if verdict.passed else 'FAIL'} ({scope}): {verdict.summary}")
        for message in failures:
            context.log.error(message)
        context.log.info(f"reports: {', '.join(str(p) for p in paths.values())}")
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
        for check in verdict.inconclusive:
            context.log.warning(check.message)
        yield dg.AssetCheckResult(
            check_name=GATE_CHECK,
            passed=verdict.passed,
            severity=dg.AssetCheckSeverity.ERROR,
            description=verdict.summary,
            metadata={
                "failures": dg.MetadataValue.json(failures),
                "categories": json.dumps(verdict.categories),
                "inconclusive": dg.MetadataValue.json([c.message for c in verdict.inconclusive]),
                **report.plotted_values(verdict),
            },
        )

    return gate
