"""Where things are and what runs: the project's folders, the BEIR host, the executor and the
nightly datasets (`RAGEVAL_*`), so the CLI, the Dagster layer and CI agree."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import NoDecode, SettingsConfigDict

from rageval_pipeline.core.settings.base import EnvGroup
from rageval_pipeline.core.settings.folders import (
    local_folder,
    storage_location,
    storage_problem,
    url_problem,
)

if TYPE_CHECKING:
    from upath import UPath

PROJECT_ROOT = Path(__file__).resolve().parents[3]
OFFICIAL_BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
Names = Annotated[list[str], NoDecode]  # "a, b" in the environment: comma-separated, not JSON


def _names(value: object) -> object:
    """`"techdocs, hotel"` -> `["techdocs", "hotel"]`, blanks dropped, first of each kept."""
    if isinstance(value, str):
        return list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    return value


def _local(value: object) -> object:
    """A folder's raw value, refused when it is a URL (before `Path` folds `s3://` to `s3:/`)."""
    problem = url_problem(value) if isinstance(value, str) else None
    if problem:
        raise PydanticCustomError("url", problem)
    return value


def _storage(value: object) -> object:
    """The storage folder's raw value: a local path or a supported object-store URL."""
    problem = storage_problem(value) if isinstance(value, str) else None
    if problem:
        raise PydanticCustomError("url", problem)
    return value


class Locations(EnvGroup):
    """Folders and hosts; an empty variable counts as unset."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_", env_ignore_empty=True)

    data: Path = Field(
        PROJECT_ROOT / "data",
        description="committed inputs: suites, systems.yaml, gate.yaml",
        json_schema_extra={"shown": "`data/`"},
    )
    storage: str | None = Field(
        None,
        description="everything the pipeline writes: Parquet, the warehouse, indexes, caches, "
        "reports; a local folder or an `s3://` URL (docs/deploy.md, Object storage)",
        json_schema_extra={"shown": "`data/storage/`"},
    )
    scratch: Path | None = Field(
        None,
        description="local folder for what must stay local when the storage is a URL: "
        "extracted BEIR datasets, downloaded index copies",
        json_schema_extra={"shown": "`data/scratch/`"},
    )
    baselines: Path | None = Field(
        None,
        description="baseline files",
        json_schema_extra={"shown": "`$RAGEVAL_DATA/baselines/`"},
    )
    beir_mirror: str = Field(
        OFFICIAL_BEIR_URL, description="base URL BEIR archives are downloaded from"
    )

    _folders = field_validator("data", "baselines", "scratch", mode="before")(_local)

    @field_validator("data", "baselines", "scratch")
    @classmethod
    def _not_a_file(cls, value: Path | None) -> Path | None:
        """A folder that is there must be a folder (one not there yet is made when written)."""
        if value is not None and value.exists() and not value.is_dir():
            raise PydanticCustomError("folder", "names a file, not a folder")
        return value

    _storage_url = field_validator("storage", mode="before")(_storage)

    @property
    def data_dir(self) -> Path:
        return self.data.resolve()

    @property
    def storage_dir(self) -> Path | UPath:
        """A local `Path`, or a `UPath` when RAGEVAL_STORAGE is an object-store URL."""
        return storage_location(self.storage or str(PROJECT_ROOT / "data" / "storage"))

    @property
    def scratch_dir(self) -> Path:
        return (self.scratch or PROJECT_ROOT / "data" / "scratch").resolve()

    @property
    def local_dir(self) -> Path:
        """The storage folder, or for a URL its local folder under the scratch folder."""
        return local_folder(self.storage_dir, self.scratch_dir)

    @property
    def baselines_dir(self) -> Path:
        return (self.baselines or self.data / "baselines").resolve()

    @property
    def beir_base_url(self) -> str:
        return self.beir_mirror.rstrip("/")


class Deployment(EnvGroup):
    """How a deployment runs the jobs (docs/deploy.md); read when the definitions load."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_")

    executor: Literal["local", "k8s", "celery"] = Field(
        "local",
        description="the steps' executor: this machine's processes, Kubernetes pods or Celery "
        "workers (the last two need the `deploy` extra)",
    )
    warehouse: Literal["duckdb", "lake"] = Field(
        "duckdb",
        description="where results live: one DuckDB file written by one process at a time, or "
        "a lake of Parquet files that processes on several machines write without a lock "
        "(docs/deploy.md)",
    )
    nightly_datasets: Names = Field(
        ["techdocs", "hotel"],
        description="comma-separated datasets the `nightly` schedule evaluates (empty: none)",
    )
    nightly_beir: Names = Field(
        [], description="comma-separated BEIR datasets evaluated nightly besides those"
    )
    heartbeat_s: float = Field(
        30,
        gt=0,
        description="seconds between a run worker's heartbeats in the Dagster instance's "
        "storage (docs/deploy.md, Interrupted runs)",
    )
    heartbeat_stale_s: float = Field(
        180,
        description="seconds without a heartbeat after which a STARTED run, on any host, is "
        "failed and its pool slots freed; at least 3 heartbeats, and well above the hosts' "
        "clock difference",
    )

    _split = field_validator("nightly_datasets", "nightly_beir", mode="before")(_names)

    @field_validator("heartbeat_stale_s")
    @classmethod
    def _beats_fit(cls, value: float, info: ValidationInfo) -> float:
        """A staleness under 3 beats would fail healthy runs whose beat came a little late."""
        beat = info.data.get("heartbeat_s")
        if beat is not None and value < 3 * beat:
            problem = f"must be at least 3 heartbeats (3 x {beat:g} s), got {value:g}"
            raise PydanticCustomError("heartbeats", problem)
        return value
