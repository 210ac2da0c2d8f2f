"""Where the project's folders are, from the environment (`settings.locations.Locations`), so
the CLI, the Dagster layer and CI agree: RAGEVAL_STORAGE (everything the pipeline writes),
RAGEVAL_DATA (committed inputs: suites, systems.yaml, gate.yaml) and RAGEVAL_BASELINES
(baseline files). Read on each call."""

from pathlib import Path

from rageval_pipeline.core.settings.locations import Locations


def data_dir() -> Path:
    return Locations.from_env().data_dir


def storage_dir() -> Path:
    return Locations.from_env().storage_dir


def baselines_dir() -> Path:
    return Locations.from_env().baselines_dir
