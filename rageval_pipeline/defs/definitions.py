"""The project's definitions, loaded from this `defs/` folder by `dg` (`dg list defs`, `dg check
defs`, `dg launch`) and by `dagster job execute -m rageval_pipeline` (as `code_location`).

Assets are made per system of `data/systems.yaml` and per dataset partition, so one function
builds them all (`build_definitions`); tests call it with their own `Settings`.
"""

from __future__ import annotations

import dagster as dg

from rageval_pipeline.core.generation.config import configured
from rageval_pipeline.core.systems import load_systems
from rageval_pipeline.defs.assets.dense_index import STEPS_IO
from rageval_pipeline.defs.assets.figures import build_figures_asset
from rageval_pipeline.defs.assets.gate import build_gate_asset
from rageval_pipeline.defs.assets.ingest import build_ingest_assets
from rageval_pipeline.defs.assets.systems import build_system_assets
from rageval_pipeline.defs.baseline_job import update_baseline
from rageval_pipeline.defs.executors import executor_from_env
from rageval_pipeline.defs.failures import console
from rageval_pipeline.defs.freshness import fresh_daily
from rageval_pipeline.defs.jobs import build_jobs
from rageval_pipeline.defs.partitions import dataset_partitions
from rageval_pipeline.defs.policy import GatePolicyResource
from rageval_pipeline.defs.resources import (
    ParquetIOManager,
    Settings,
    StepsIOManager,
    WarehouseResource,
)
from rageval_pipeline.defs.run_workers import free_dead_runs
from rageval_pipeline.defs.schedules import build_nightly
from rageval_pipeline.defs.sensors import build_version_sensor


def build_definitions(settings: Settings | None = None) -> dg.Definitions:
    settings = settings or Settings()
    datasets = dataset_partitions(settings.data / "suites", settings.scratch / "cache")
    catalog = load_systems(settings.data / "systems.yaml")
    system_assets = [a for s in catalog.values() for a in build_system_assets(s, datasets)]
    jobs = build_jobs(list(catalog), datasets)
    system_jobs = {name: job for job in jobs for name in catalog if job.name == f"evaluate_{name}"}
    gate = fresh_daily(build_gate_asset(catalog, settings.data / "gate.yaml", datasets))
    assets = [*build_ingest_assets(datasets), *system_assets, gate, build_figures_asset(datasets)]
    extra: dict = {}
    if configured():  # the generation check: off until a provider is configured
        from rageval_pipeline.defs.assets.generation import build_generation

        generation_assets, generation_job, extra = build_generation(
            catalog, datasets, settings.data / "suites"
        )
        assets, jobs = [*assets, *generation_assets], [*jobs, generation_job]
        # Synthetic queries, LLM labels and the judge's calibration: also only with a provider.
        from rageval_pipeline.defs.assets.llm_labels import build_labels

        label_assets, label_job, label_resources = build_labels(datasets)
        assets, jobs = [*assets, *label_assets], [*jobs, label_job]
        extra |= label_resources
    return dg.Definitions(
        assets=assets,
        jobs=[*jobs, update_baseline],
        schedules=[build_nightly(jobs[0])],
        sensors=[build_version_sensor(system_jobs, settings.data / "systems.yaml"), free_dead_runs],
        loggers={"console": console},
        # Every run beats, a UI launch of some assets too: a run that never beat is dead.
        executor=executor_from_env(),
        resources={
            "settings": settings,
            "warehouse": WarehouseResource(storage_dir=settings.storage_dir),
            "policy": GatePolicyResource(settings=settings),
            "io_manager": ParquetIOManager(base_dir=settings.storage_dir),
            # What steps pass each other besides assets (a dense index's shards), under the
            # storage folder every worker shares.
            STEPS_IO: StepsIOManager(base_dir=str(settings.storage / "steps")),
            **extra,
        },
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
