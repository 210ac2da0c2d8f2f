"""Where the project's folders are, from the environment, so the CLI, the Dagster layer and CI
agree: RAGEVAL_STORAGE (everything the pipeline writes), RAGEVAL_DATA (committed inputs:
suites, systems.yaml, gate.yaml) and RAGEVAL_BASELINES (baseline files)."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _from_env(name: str, default: Path) -> Path:
    return Path(os.environ.get(name) or default).resolve()


def data_dir() -> Path:
    return _from_env("RAGEVAL_DATA", PROJECT_ROOT / "data")


def storage_dir() -> Path:
    return _from_env("RAGEVAL_STORAGE", PROJECT_ROOT / "data" / "storage")


def baselines_dir() -> Path:
    return _from_env("RAGEVAL_BASELINES", data_dir() / "baselines")
