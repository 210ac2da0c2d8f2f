"""The one way to get the warehouse of a storage folder: the DuckDB file by default, the lake
when `RAGEVAL_WAREHOUSE=lake` or when the storage is not a local folder (an fsspec URL, given as
a UPath: only the lake works on an object store)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rageval_pipeline.core.settings.locations import Deployment
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.lake import Lake
from rageval_pipeline.core.storage.location import (
    NO_BUCKET,
    StorageError,
    is_local,
    local_dir,
    protocols,
)
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE, Warehouse

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

LAKE_FOLDER = "lake"  # the lake's root under the storage folder


def open_warehouse(
    storage: Path,
    *,
    owner: str = "",
    existing: bool = False,
    kind: Literal["duckdb", "lake"] | None = None,
) -> BaseWarehouse:
    """The warehouse of `storage` (a Path, or a UPath on any fsspec filesystem); `kind`
    defaults to `RAGEVAL_WAREHOUSE`. `existing`: a StorageError when nothing was evaluated
    there yet, as the CLI's readers want."""
    fs: AbstractFileSystem | None = getattr(storage, "fs", None)  # a UPath
    remote = fs is not None and not is_local(fs)
    if (kind or warehouse_kind(storage)) == "lake":
        if fs is None:
            import fsspec

            fs = fsspec.filesystem("file")
        root = storage.path if remote else str(Path(storage).resolve())  # type: ignore[attr-defined]
        return lake_at(fs, f"{root.rstrip('/')}/{LAKE_FOLDER}", owner=owner, existing=existing)
    if existing:
        return Warehouse.existing(storage)
    return Warehouse(local_dir(storage) / WAREHOUSE_FILE, owner=owner)


def warehouse_kind(storage: Path) -> Literal["duckdb", "lake"]:
    """`RAGEVAL_WAREHOUSE`, except that storage on a non-local filesystem (a UPath) is a lake."""
    fs: AbstractFileSystem | None = getattr(storage, "fs", None)
    if fs is not None and not is_local(fs):
        return "lake"
    return Deployment.from_env().warehouse


def lake_at(fs: AbstractFileSystem, root: str, *, owner: str = "", existing: bool = False) -> Lake:
    """The lake at `root` on `fs` (e.g. an `s3fs.S3FileSystem` and `bucket/eval/lake`)."""
    lake = Lake(fs, root, owner=owner)
    if existing and not lake.commits():
        if not is_local(fs) and not fs.exists(root.split("/")[0]):
            raise StorageError(f"{protocols(fs)[0]}://{root.split('/')[0]}", NO_BUCKET)
        raise StorageError(lake.location, "no warehouse yet: run an evaluation first")
    return lake
