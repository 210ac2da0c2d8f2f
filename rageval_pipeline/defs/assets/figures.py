"""The gate report's figures, drawn in a step of their own after the verdict.

Drawing (importing matplotlib, 0.1-0.15 s a figure, the latency figure new at every
evaluation) made the gate step 0.27-0.29 of a cold job's steps; the gate step now decides,
records and writes its reports without figures, and this step adds them
(`core.report.draw_figures`: the shared plot cache, each report folder rewritten whole). The
verdict never depends on drawing: a drawing error is a warning and the reports stand without
figures.

Dagster skips every step downstream of a failed one, so when this step follows in the same run
the gate step does not fail on a FAIL verdict: it leaves the refusal to this step, which ends
with the verdict line the gate recorded (`dagster job execute` still exits non-zero, the log
still ends with `FAIL <dataset>: ...`), and so does a re-execution of this step alone.
Materialized without this step, the gate fails itself.
"""

from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath

import dagster as dg

from rageval_pipeline.core import report
from rageval_pipeline.core.io.paths import scratch_dir
from rageval_pipeline.defs.failures import one_line_errors, refusal
from rageval_pipeline.defs.resources import Settings

FIGURES = "report_figures"
GATE = "gate"


def figures_follow(context: dg.AssetExecutionContext) -> bool:
    """Whether this run draws the gate's figures after the gate step (so the gate step leaves
    a FAIL verdict's refusal to it)."""
    steps = context.run.step_keys_to_execute  # None: every step of the job's selection
    if steps is not None:
        return FIGURES in steps
    selection = context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys
    return dg.AssetKey(FIGURES) in selection


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
    def report_figures(context: dg.AssetExecutionContext, settings: Settings) -> Iterator:
        """Draw the figures of the dataset's latest gate report (this run's, when the gate ran
        in it) into its folder and `latest/`; then, when that verdict failed, end the step
        with its line."""
        dataset = settings.dataset(context).name
        meta = _gate_metadata(context, context.partition_key)
        stamp = PurePosixPath(meta["report_html"].path).parent.name  # its reports' folder
        folder = settings.reports_dir / dataset / stamp
        drawn = 0
        try:
            drawn = report.draw_figures(
                folder,
                settings.reports_dir / dataset / "latest",
                plot_cache=scratch_dir() / "cache" / "plots",  # (shared by every storage)
            )
            context.log.info(f"{drawn} figure(s) drawn into {folder}")
        except Exception as exc:  # the verdict stands; its reports read well without figures
            context.log.warning(f"figures not drawn ({type(exc).__name__}: {exc}): {folder}")
        yield dg.MaterializeResult(metadata={"figures": drawn, "report": str(folder)})
        if not meta["passed"].value:  # also re-executed alone: a FAIL never turns green
            raise refusal(meta["verdict"].value)

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
