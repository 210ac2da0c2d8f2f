"""Jobs: evaluate a whole dataset partition, one system on it, or only ingest it."""

import dagster as dg

from rageval_pipeline.defs.assets.figures import FIGURES
from rageval_pipeline.defs.executors import executor_from_env


def build_jobs(system_names: list[str], datasets: dg.PartitionsDefinition) -> list:
    executor = executor_from_env()
    gate = dg.AssetSelection.assets("gate", FIGURES)  # the figures: drawn after the verdict
    jobs = [
        dg.define_asset_job(
            "evaluate_dataset",
            # The optional LLM groups run only in their own jobs: generation in
            # evaluate_generation, llm_labels in label_dataset.
            selection=dg.AssetSelection.all()
            - dg.AssetSelection.groups("generation", "llm_labels"),
            executor_def=executor,
            description="Ingest a dataset, run and measure every configured system, gate.",
        ),
        dg.define_asset_job(
            "ingest_dataset",
            selection=dg.AssetSelection.groups("ingest"),
            executor_def=executor,
            description="Download/verify and ingest one dataset into Parquet tables.",
        ),
    ]
    for name in system_names:
        jobs.append(
            dg.define_asset_job(
                f"evaluate_{name}",
                selection=dg.AssetSelection.assets(dg.AssetKey([name, "metrics"])).upstream()
                | gate,
                executor_def=executor,
                description=f"Evaluate only {name} (and what it fuses) on a dataset, then gate.",
            )
        )
    return jobs
