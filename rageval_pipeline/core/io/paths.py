"""Where the project's folders are, from the environment (`settings.locations.Locations`), so
the CLI, the Dagster layer and CI agree: RAGEVAL_STORAGE (everything the pipeline writes),
RAGEVAL_DATA (committed inputs: suites, systems.yaml, gate.yaml), RAGEVAL_BASELINES
(baseline files) and RAGEVAL_SCRATCH (what stays local when the storage is a URL). Read on
each call; importing this module imports no pydantic, so the CLI builds its parser without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from upath import UPath

    from rageval_pipeline.core.settings.locations import Locations


def _locations() -> Locations:
    from rageval_pipeline.core.settings.locations import Locations

    return Locations.from_env()


def data_dir() -> Path:
    return _locations().data_dir


def storage_dir() -> Path | UPath:
    return _locations().storage_dir


def scratch_dir() -> Path:
    return _locations().scratch_dir


def baselines_dir() -> Path:
    return _locations().baselines_dir
