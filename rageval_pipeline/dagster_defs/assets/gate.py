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
from rageval_pipeline.core.chunking import integrity
from rageval_pipeline.core.gate import RunSummary, judge, load_baselines, load_policy
from rageval_pipeline.core.report.seed003 import validation_report
from rageval_pipeline.core.reuse import content_key
from rageval_pipeline.core.storage import write_text
from rageval_pipeline.core.summaries import select_runs, summaries
from rageval_pipeline.dagster_defs.resources import Settings, WarehouseResource

GATE_CHECK = "verdict_passes"


def _asset_table(settings: Settings, *key: str) -> pd.DataFrame | None:
    """An upstream asset's stored partition (ParquetIOManager's layout), if materialized."""
    path = settings.storage.joinpath("assets", *key[:-1], f"{key[-1]}.parquet")
    return pd.read_parquet(path) if path.is_file() else None


def _write_validation_report(settings: Settings, summary: RunSummary, stamp: datetime) -> None:
    """Seed 003's report_YYYYMMDD_HHMMSS.json of one run, beside the gate reports."""
    queries = _asset_table(settings, "queries", summary.dataset)
    chunks = _asset_table(settings, summary.system, "chunks", summary.dataset)
    about: dict[str, dict] = {}
    if queries is not None:
        fields = queries[["query_id", "text", "query_type"]].astype(object)
        fields = fields.where(fields.notna(), None)  # a missing query type is None, not NaN
        about = (
            fields.drop_duplicates("query_id", keep="last").set_index("query_id").to_dict("index")
        )
    seed = validation_report(
        summary,
        about,
        timestamp=stamp,
        integrity=integrity(chunks) if chunks is not None else None,
    )
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
        runs = select_runs(store, dagster_run_id=context.run.run_id)
        scope = "this run"
        if runs.empty:
            runs, scope = select_runs(store), "latest evaluations"
        judged, baselines = summaries(store, runs), load_baselines(settings.baselines)
        verdict = judge(judged, baselines, load_policy(settings.data / "gate.yaml"))
        stamp = datetime.now(UTC)
        logged = experiments.record(
            store,
            verdict,
            judged,
            baselines,
            description=context.run.tags.get(experiments.DESCRIPTION_TAG),
            created_at=stamp,
        )
        experiments.export(experiments.load(store), settings.reports_dir / "experiments.json")
        folder = settings.reports_dir / f"{stamp:%Y%m%dT%H%M%SZ}"
        datasets = sorted(set(runs["dataset"]))
        history = store.query(
            f"SELECT * FROM history WHERE dataset IN ({', '.join('?' * len(datasets))})",
            datasets,
        )
        full = report.build_report(verdict, judged, baselines, history)
        latest, plots = settings.reports_dir / "latest", settings.storage / "cache" / "plots"
        paths = report.write_reports(full, folder, latest, plot_cache=plots)
        for summary in judged:
            _write_validation_report(settings, summary, stamp)
        store.record_gate(
            dict(
                gate_id=f"{stamp:%Y%m%dT%H%M%S%fZ}",
                dagster_run_id=context.run.run_id,
                created_at=stamp,
                passed=verdict.passed,
                categories=",".join(verdict.categories),
                summary=verdict.summary,
                report_json=report.to_json(verdict),
            )
        )
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
