"""The `update_baseline` job: `rageval baseline update` from the Dagster UI or CLI.

Run config: `ops: {promote_baseline: {config: {dataset: ..., system: ..., accept_worse: ...,
pin_anchor: false}}}`. It refuses (the run fails, nothing written) a baseline worse than the
one it replaces unless `accept_worse` says why (or, in the older spelling, `force` with a
`note`), as the CLI does (core.gate.baselines.promote).
"""

import dagster as dg

from rageval_pipeline.core.gate.baselines import promote
from rageval_pipeline.core.history.summaries import select_runs, summaries
from rageval_pipeline.defs.failures import refusal
from rageval_pipeline.defs.policy import GatePolicyResource
from rageval_pipeline.defs.resources import Settings, WarehouseResource


class UpdateBaselineConfig(dg.Config):
    dataset: str
    system: str | None = None  # default: every evaluated system of the dataset
    accept_worse: str | None = None
    pin_anchor: bool = False
    force: bool = False
    note: str | None = None


@dg.op(name="promote_baseline")
def update_baseline_op(
    context: dg.OpExecutionContext,
    config: UpdateBaselineConfig,
    settings: Settings,
    warehouse: WarehouseResource,
    policy: GatePolicyResource,
) -> None:
    store = warehouse.warehouse
    runs = select_runs(store, dataset=config.dataset, system=config.system)
    if runs.empty:
        raise refusal(f"no evaluation of dataset {config.dataset!r} to promote")
    written = promote(
        summaries(store, runs),
        settings.baselines,
        policy.policy,
        accept_worse=config.accept_worse,
        pin_anchor=config.pin_anchor,
        force=config.force,
        note=config.note,
    )
    for promotion in written:
        lines = "\n".join(f"  {line}" for line in promotion.lines)
        context.log.info(f"wrote {promotion.path}:\n{lines}")
        for line in promotion.worse:
            context.log.warning(f"{promotion.path}: the new baseline is worse on {line}")


@dg.job(description="Promote the latest evaluation of a dataset to its committed baseline.")
def update_baseline() -> None:
    update_baseline_op()
