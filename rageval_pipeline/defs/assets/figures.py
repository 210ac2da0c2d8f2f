"""The gate report's figures, drawn after the verdict.

Drawing (importing matplotlib, 0.1-0.15 s a figure, the latency figure new at every
evaluation) made the gate step 0.27-0.29 of a cold job's steps; the gate step now decides,
records and writes its reports without figures, and on a PASS this step, next in every job that
gates, adds them. Dagster skips every step after a failed one, so on a FAIL the gate step draws
them itself (`draw_into`, the same drawing) before it fails the run with the verdict line: a
blocked release's report, the one people investigate, has its figures too. The verdict never
depends on drawing: a drawing error is a warning and the reports stand without figures.

Re-executed alone for a dataset whose latest gate failed, this step (re)draws that report's
figures and succeeds: the gate asset and its failed check stay failed.
"""

from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import dagster as dg

from rageval_pipeline.core import report
from rageval_pipeline.core.io.paths import scratch_dir
from rageval_pipeline.defs.failures import one_line_errors, refusal
from rageval_pipeline.defs.resources import Settings

FIGURES = "report_figures"
GATE = "gate"


def draw_into(context: dg.AssetExecutionContext, folder: Path, *more: Path) -> int:
    """Draw the figures of the report in `folder` into it and each of `more`
    (`core.report.draw_figures`, through the plot cache shared by every storage); returns how
    many were drawn. A drawing error is a warning: the reports read well without figures."""
    try:
        drawn = report.draw_figures(folder, *more, plot_cache=scratch_dir() / "cache" / "plots")
    except Exception as exc:  # the verdict stands whatever the drawing does
        context.log.warning(f"figures not drawn ({type(exc).__name__}: {exc}): {folder}")
        return 0
    context.log.info(f"{drawn} figure(s) drawn into {folder}")
    return drawn


def build_figures_asset(datasets: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The figures of each dataset's gate report (partitioned like the gate)."""

    @dg.asset(
        name=FIGURES,
        deps=[GATE],
        partitions_def=datasets,
        group_name="gate",
        code_version=report.drawing_version(),
        kinds={"svg"},
    )
    @one_line_errors
    def report_figures(
        context: dg.AssetExecutionContext, settings: Settings
    ) -> dg.MaterializeResult:
        """Draw the figures of the dataset's latest gate report (this run's, when the gate ran
        in it) into its folder and `latest/`. Only draws: whatever that verdict was, the step
        succeeds (a FAIL's run has already failed in the gate step)."""
        dataset = settings.dataset(context).name
        meta = _gate_metadata(context, context.partition_key)
        stamp = PurePosixPath(meta["report_html"].path).parent.name  # its reports' folder
        folder = settings.reports_dir / dataset / stamp
        drawn = draw_into(context, folder, settings.reports_dir / dataset / "latest")
        return dg.MaterializeResult(metadata={"figures": drawn, "report": str(folder)})

    return report_figures


def _gate_metadata(context: dg.AssetExecutionContext, partition: str) -> Mapping:
    """The metadata of this run's gate materialization of `partition` (another run's gate of
    the same dataset may have materialized since), else of the dataset's latest."""
    gate = dg.AssetKey(GATE)
    materialized = dg.DagsterEventType.ASSET_MATERIALIZATION
    for entry in context.instance.all_logs(context.run.run_id, of_type=materialized):
        done = entry.asset_materialization
        if done is not None and done.asset_key == gate and done.partition == partition:
            return done.metadata
    found = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=gate, asset_partitions=[partition]), limit=1
    ).records
    if not found:
        raise refusal(f"{partition}: no gate report to draw figures for (materialize gate first)")
    return found[0].asset_materialization.metadata
