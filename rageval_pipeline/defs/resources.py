"""Resources: where things live (settings), the warehouse, and how asset tables are stored."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import PrivateAttr
from upath import UPath

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import paths
from rageval_pipeline.core.settings.folders import storage_location, storage_problem, url_problem
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.choose import open_warehouse, warehouse_kind
from rageval_pipeline.core.storage.files import write_parquet
from rageval_pipeline.core.storage.location import (
    StorageError,
    is_remote,
    local_dir,
    parquet_rows,
    read_parquet,
)
from rageval_pipeline.core.storage.reuse import file_digest, read_stamp, write_stamp
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.defs import run_workers
from rageval_pipeline.defs.failures import one_line_errors

# The deepest run a step makes: ten times trec_eval's customary 1000, and a bound on the rows
# a run holds (queries x depth).
MAX_DEPTH = 10_000
# Output metadata: the content key (core.storage.reuse) a table was produced or reused for.
CONTENT_KEY = "content_key"


def folder(configured: str | None, field: str, default: Callable[[], Path]) -> Path:
    """A local folder from run config (`field` names it there), else `default()` from the
    environment; a URL is refused, not taken for a local path (core.settings.folders)."""
    if not configured:
        return default()
    if problem := url_problem(configured):
        raise InputError("run config", problem, field=field)
    return Path(configured)


def storage_folder(configured: str | None, field: str) -> Path | UPath:
    """The storage folder from run config (`field` names it there), else $RAGEVAL_STORAGE: a
    local folder or an object-store URL (core.settings.folders)."""
    if not configured:
        return paths.storage_dir()
    if problem := storage_problem(configured):
        raise InputError("run config", problem, field=field)
    return storage_location(configured)


@dataclass(frozen=True)
class Dataset:
    """The dataset partition a step runs on, and the folder its files are read from."""

    name: str
    folder: Path
    bundled: bool  # a suite under data/suites, else a BEIR dataset extracted from its archive

    @cached_property
    def reference(self) -> ChunkingConfig | None:
        """The suite's reference chunking (None for a BEIR dataset), read once per step: what
        every system's `run_chunking` resolves against."""
        return loaders.reference_chunking(self.folder)


class Settings(dg.ConfigurableResource):
    """Paths and run-wide knobs. A path left unset comes from the environment (see
    `rageval_pipeline.core.io.paths`), so run config may set only what it changes, e.g.
    `resources: {settings: {config: {top_k: 10}}}`."""

    storage_dir: str | None = None
    data_dir: str | None = None
    baselines_dir: str | None = None
    beir_mirror: str | None = None  # default: $RAGEVAL_BEIR_MIRROR, else BEIR's official host
    top_k: int = 100  # read through `depth`, which checks it
    split: str = "test"
    # Recompute tables, chunks, indexes, runs and metrics even when their inputs and code are
    # unchanged.
    force: bool = False

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run_workers.claim(context)  # a killed run worker frees its slot and steps: run_workers

    @property
    def depth(self) -> int:
        """`top_k`, checked: Dagster checks run config before the run only by type, and a depth
        of 0 failed deep inside BM25 (`ValueError: kth(=28) out of bounds`)."""
        if not 1 <= self.top_k <= MAX_DEPTH:
            problem = f"must be between 1 and {MAX_DEPTH}, got {self.top_k}"
            raise InputError("run config", problem, field="settings.top_k")
        return self.top_k

    @property
    def storage(self) -> Path | UPath:
        return storage_folder(self.storage_dir, "settings.storage_dir")

    @property
    def scratch(self) -> Path:
        """The local folder for what must be local (BEIR archives and their extraction): the
        storage folder, or for a URL its folder under $RAGEVAL_SCRATCH."""
        return local_dir(self.storage)

    @property
    def data(self) -> Path:
        return folder(self.data_dir, "settings.data_dir", paths.data_dir)

    @property
    def baselines(self) -> Path:
        return folder(self.baselines_dir, "settings.baselines_dir", paths.baselines_dir)

    def dataset_folder(self, name: str) -> Path:
        """A bundled suite's folder under data/suites, else the extracted BEIR archive."""
        bundled = self.data / "suites" / name
        return bundled if bundled.is_dir() else self.scratch / "datasets" / name

    def dataset(self, context: dg.AssetExecutionContext) -> Dataset:
        """The dataset partition of a step, with its folder."""
        return self.partition(context.partition_key)

    def partition(self, name: str) -> Dataset:
        """The dataset partition `name`, with its folder."""
        folder = self.dataset_folder(name)
        return Dataset(name, folder, bundled=folder.parent == self.data / "suites")

    def index_dir(self, system: str, dataset: str) -> Path | UPath:
        return self.storage / "indexes" / system / dataset

    def cache_dir(self, system: str, stage: str, dataset: str) -> Path | UPath:
        """Where a stage keeps its latest table by content key (see core.storage.reuse)."""
        return self.storage / "cache" / system / stage / dataset

    @property
    def reports_dir(self) -> Path | UPath:
        return self.storage / "reports"

    def stored(self, *key: str, partition: str | None) -> "StoredTable":
        """An upstream asset's stored partition (see StoredTable)."""
        return StoredTable(_existing(stored_path(self.storage, key, partition), "/".join(key)))


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse of the storage folder (core.storage.choose): the DuckDB file
    (`rageval.duckdb`), whose writes queue on its lock naming the Dagster run holding it, or
    the lock-free lake (`RAGEVAL_WAREHOUSE=lake`, and always for a URL: core.storage.lake)."""

    storage_dir: str | None = None  # default: $RAGEVAL_STORAGE
    _owner: str = PrivateAttr("")

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._owner = f"dagster run {context.run.run_id}" if context.run else ""
        run_workers.claim(context)

    @property
    def warehouse(self) -> BaseWarehouse:
        return open_warehouse(
            storage_folder(self.storage_dir, "warehouse.storage_dir"), owner=self._owner
        )


WRITE_POOL = "duckdb_write"  # the pool of the assets that write the warehouse (docs/deploy.md)


def write_pool() -> str | None:
    """The pool of the warehouse writers: the DuckDB file's writers take turns in it; the
    lake's writers need no turns (core.storage.lake), so they are in none."""
    return WRITE_POOL if warehouse_kind(paths.storage_dir()) == "duckdb" else None


def ensure_write_pool(instance: dg.DagsterInstance) -> int | None:
    """Create the `duckdb_write` pool's row once, before any run claims it, and return its slot
    count (None: this instance has no pools). Safe when several processes start at once:
    Dagster 1.13 creates a missing row on a run's first claim, and two runs doing so at the
    same moment race (on PostgreSQL the loser's transaction aborts and its step hangs). Here
    the row is created with `set_concurrency_slots`, whose insert a unique key guards; the
    loser of that race finds the row on its next look. The limit is the instance's
    `concurrency.pools.default_limit`, else 1."""
    from sqlalchemy.exc import IntegrityError

    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return None
    for _ in range(3):
        limits = {pool.name: pool.limit for pool in storage.get_pool_limits()}
        if WRITE_POOL in limits:
            return limits[WRITE_POOL]
        try:
            storage.set_concurrency_slots(
                WRITE_POOL, instance.global_op_concurrency_default_limit or 1
            )
        except IntegrityError:
            continue  # another process created it first
    raise RuntimeError(f"could not create the concurrency pool {WRITE_POOL}")


def stored_path(base: Path | UPath, key: Sequence[str], partition: str | None) -> Path | UPath:
    """Where ParquetIOManager keeps an asset partition's table."""
    return base.joinpath("assets", *key, f"{partition or 'all'}.parquet")


def stamp_path(path: Path | UPath) -> Path | UPath:
    """The `.key` file beside a stored table or an index folder: the content key it was
    produced for (see core.storage.reuse)."""
    return path.with_name(path.name + ".key")


def is_file(path: Path | UPath) -> bool:
    """Whether `path` is a file. On object storage, a failure to ask (a store that stopped
    answering, refused credentials) is raised, for its own line (core.storage.faults), not
    taken for "no such file" as `UPath.is_file` does, which sent people to materialize what
    was there all along."""
    if not is_remote(path):
        return path.is_file()
    try:
        return path.fs.info(path.path).get("type") == "file"
    except FileNotFoundError:
        return False


def _existing(path: Path | UPath, asset: str) -> Path | UPath:
    if not is_file(path):
        # A StorageError, so that a step reading it ends with this one line (failures.py).
        raise StorageError(path, f"does not exist: materialize {asset} for this partition first")
    return path


class StoredTable:
    """An upstream table as ParquetIOManager stored it, read only when a step needs its rows:
    a stage that reuses its last result decides from `key` alone. Stages declare such tables
    as `deps` and look them up with `Settings.stored`, so Dagster loads nothing for them."""

    def __init__(self, path: Path | UPath) -> None:
        self.path = path

    @cached_property
    def frame(self) -> pd.DataFrame:
        return read_parquet(self.path).to_pandas()

    @property
    def rows(self) -> int:
        return parquet_rows(self.path)

    @cached_property
    def key(self) -> str:
        """A digest of the stored file's bytes: a reused upstream table is not rewritten, so
        it keeps its key; a recomputed one keeps it too when its content is the same (Parquet
        written by the same pyarrow is byte for byte the same), else gets a new one. Read once
        per step's table (on object storage `file_digest` hashes the whole file each call)."""
        return file_digest(self.path)

    @property
    def stamp(self) -> str | None:
        """The content key the table was produced for (its `.key` file); None when unknown or
        not stored."""
        return read_stamp(stamp_path(self.path))


class ParquetIOManager(dg.ConfigurableIOManager):
    """Each asset partition's DataFrame as one Parquet file, written atomically, with the
    content key it was produced for in a `.key` file beside it."""

    base_dir: str | None = None  # default: the storage folder ($RAGEVAL_STORAGE)

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path | UPath:
        part = context.asset_partition_key if context.has_asset_partitions else None
        base = storage_folder(self.base_dir, "io_manager.base_dir")
        return stored_path(base, context.asset_key.path, part)

    @one_line_errors
    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        """Write the table, unless it is a reused result (`reused: true`) whose `content_key`
        is the one the stored file was written with: then the file already holds it."""
        path = self._path(context)
        stamp = stamp_path(path)
        meta = {k: getattr(v, "value", v) for k, v in context.output_metadata.items()}
        key = meta.get(CONTENT_KEY)
        if not (meta.get("reused") is True and is_file(path) and read_stamp(stamp) == key):
            write_stamp(stamp, None)  # until the new file is in place
            write_parquet(obj, path)
            write_stamp(stamp, key)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path)), "rows": len(obj)})

    @one_line_errors
    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        path = _existing(self._path(context), context.asset_key.to_user_string())
        return read_parquet(path).to_pandas()


class StepsIOManager(dg.FilesystemIOManager):
    """What steps pass each other besides assets (a dense index's shards), pickled under
    `base_dir` by Dagster's own filesystem IO manager, with its failures as one line each (an
    object store that stopped answering: core.storage.faults), not botocore's 160-line trace."""

    def create_io_manager(self, context: dg.InitResourceContext) -> dg.IOManager:
        return _OneLine(super().create_io_manager(context))


class _OneLine(dg.IOManager):
    """An IO manager's expected failures as one line (defs/failures.py)."""

    def __init__(self, inner: dg.IOManager) -> None:
        self._inner = inner

    @one_line_errors
    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        self._inner.handle_output(context, obj)

    @one_line_errors
    def load_input(self, context: dg.InputContext) -> object:
        return self._inner.load_input(context)
