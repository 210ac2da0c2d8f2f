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
The steps themselves are `run_step.make_run` and `metrics_step.measure_metrics`.
"""

import dagster as dg
import pandas as pd

from rageval_pipeline.core.results.store import METRICS_VERSION
from rageval_pipeline.core.systems import SystemConfig
from rageval_pipeline.defs.assets.chunked import chunks_version
from rageval_pipeline.defs.assets.indexes import index_assets
from rageval_pipeline.defs.assets.metrics_step import measure_metrics
from rageval_pipeline.defs.assets.run_step import RUN_VERSION, make_run, run_sources
from rageval_pipeline.defs.failures import one_line_errors
from rageval_pipeline.defs.policy import GatePolicyResource
from rageval_pipeline.defs.resources import Settings, WarehouseResource, write_pool


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
    """The system's chain: chunks and index (an indexed system), run, metrics."""
    versions = code_versions(system)
    common = dict(partitions_def=datasets, group_name=f"system_{system.name}")
    chain = index_assets(system, versions, datasets) if system.indexed else []
    return [*chain, _run_asset(system, versions, common), _metrics_asset(system, versions, common)]


def _run_asset(system: SystemConfig, versions: dict, common: dict) -> dg.AssetsDefinition:
    name = system.name
    index = [dg.AssetKey([name, "index"])] if system.indexed else []

    @dg.asset(
        key=[name, "run"],
        deps=[*(dg.AssetKey(list(k)) for k in run_sources(system).values()), *index],
        description=f"Top-k results of {name} per query, with per-query latency.",
        kinds={"parquet"},
        code_version=versions["run"],
        **common,
    )
    @one_line_errors
    def run(context: dg.AssetExecutionContext, settings: Settings) -> pd.DataFrame:
        return make_run(context, settings, system, versions["run"])

    return run


def _metrics_asset(system: SystemConfig, versions: dict, common: dict) -> dg.AssetsDefinition:
    name = system.name

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
        policy: GatePolicyResource,
    ) -> dg.Output:
        resources = (settings, warehouse, policy.policy)
        return measure_metrics(context, resources, system, versions["metrics"])

    return metrics
