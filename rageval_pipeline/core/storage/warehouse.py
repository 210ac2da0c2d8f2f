"""Where results live: one DuckDB warehouse file (the default kind of warehouse;
`core.storage.lake` is the other, for writers on several machines; callers get either from
`core.storage.choose.open_warehouse`).

DuckDB allows one writing process per file. Within one Dagster instance the writers
(`<system>/metrics`, `gate`) take turns through the concurrency pool `duckdb_write`
(docs/deploy.md). Every write also goes through `Warehouse.connect`, which holds an exclusive
`flock` on a lock file beside the database for the (short) life of the connection
(`core.storage.locks`): that covers what Dagster cannot see (the `rageval` CLI, runs on separate
instances whose pools are not shared, instances without a pool limit such as the local SQLite
default) and what its pool does not promise (it is not a strict mutex: docs/deploy.md). A
writer kept waiting names the holder every 30 s and gives up after `write_wait_s`. Reads take
no lock and open the file read-only: they work on read-only storage, and while a job writes
they wait only for DuckDB's own file lock of that one short write. Opening the file costs tens
of milliseconds, so a read or write block shares its connection with every read (and write)
nested in it on the same thread: the gate does its reads on one connection and its writes on
another.

A step killed half-way leaves nothing that is used later: an evaluation's `runs` row is
committed `finished = false` and flipped only when everything it writes is written (and so is
a gate's `gate_results` row); readers skip unfinished rows. Its files are written atomically
(`core.storage.files`).

Storage faults are `StorageError`s (one line naming the file or folder, and what to do).

The storage folder may be an object-store URL (a `UPath`): `core.storage.choose.open_warehouse`
decides where the warehouse of a storage folder lives (for a URL: a lake in the bucket).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from rageval_pipeline.core.settings.limits import WarehouseLimits
from rageval_pipeline.core.storage import locks
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.files import NO_SPACE, READ_ONLY, disk_full, space, writable
from rageval_pipeline.core.storage.location import StorageError, local_dir
from rageval_pipeline.core.storage.schema import APPENDED_TABLES, RESULT_TABLES, SCHEMA

if TYPE_CHECKING:  # imported where a connection is opened: `rageval validate` needs no DuckDB
    import duckdb
    from upath import UPath

WAREHOUSE_FILE = "rageval.duckdb"
_LOCKED = "Could not set lock on file"  # DuckDB's message when another process holds it
_REFUSED = ("Permission denied", "Read-only file system")  # DuckDB's, for a file it cannot write
# Paths whose schema this process has created (or found), with the file's inode: once each.
_SCHEMA_READY: set[tuple[Path, int]] = set()
# Per thread (a DuckDB connection is not for sharing between threads): warehouse path ->
# (connection, read_only) of the read or write block open on it.
_OPEN = threading.local()


def _held() -> dict[Path, tuple[duckdb.DuckDBPyConnection, bool]]:
    if not hasattr(_OPEN, "connections"):
        _OPEN.connections = {}
    return _OPEN.connections


def _transactions() -> set[duckdb.DuckDBPyConnection]:
    if not hasattr(_OPEN, "transactions"):
        _OPEN.transactions = set()
    return _OPEN.transactions


class Warehouse(BaseWarehouse):
    """The DuckDB file holding every run's tables, with history across runs."""

    def __init__(self, path: Path, *, owner: str = "") -> None:
        self.path = path
        self.owner = owner  # what this process is, for writers that wait for its lock

    @property
    def location(self) -> str:
        return str(self.path)

    @classmethod
    def existing(cls, storage: Path | UPath) -> Warehouse:
        """The warehouse of a storage folder (for a URL: in its local scratch folder, as DuckDB
        needs a local file and a lock); InputError when nothing was evaluated there yet."""
        warehouse = cls(local_dir(storage) / WAREHOUSE_FILE)
        with warehouse.read():
            return warehouse

    def _open(self, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection; a file that is not a DuckDB database is a StorageError and is
        left exactly as it is."""
        import duckdb

        try:
            return duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if _LOCKED in str(exc):
                raise  # a writer holds the file: the caller waits
            if not read_only and any(m in str(exc) for m in _REFUSED):
                raise StorageError(self.path.parent, READ_ONLY) from None
        except duckdb.Error:
            pass  # any other failure to open: the file is not a database we can read
        raise StorageError(
            self.path,
            "not a readable DuckDB database; nothing was changed. Move it aside "
            f"(mv {self.path} {self.path}.broken) and re-run the evaluations to start a new "
            "one; the Parquet mirror under tables/ keeps every past run's tables",
        )

    @contextmanager
    def _hold(
        self, con: duckdb.DuckDBPyConnection, *, read_only: bool
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """Offer `con` to the blocks nested in this one, then close it."""
        _held()[self.path] = (con, read_only)
        try:
            yield con
        finally:
            del _held()[self.path]
            con.close()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection under the write lock; the schema is created once per
        process and file. Inside another write block, that block's connection."""
        held = _held().get(self.path)
        if held is not None:
            con, read_only = held
            if read_only:  # DuckDB refuses a second configuration of an open file
                raise RuntimeError(f"{self.path}: a write inside a read block; end the read first")
            yield con
            return
        limits = WarehouseLimits.from_env()
        with ExitStack() as stack:
            with writable(self.path.parent):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                lock = self.path.with_suffix(".lock")
                try:
                    stack.enter_context(
                        locks.held(lock, owner=self.owner, wait_s=limits.write_wait_s)
                    )
                except locks.Busy as busy:
                    raise StorageError(
                        self.path,
                        f"busy: waited {busy.waited_s:.0f} s for the write lock held by "
                        f"{busy.holder}; if that process is stuck, stop it and run again"
                        + limits.hint("write_wait_s"),
                    ) from None
            con = self._open_for_write(limits.write_wait_s)
            # A full disk anywhere in the block (DuckDB's own IO errors too, a checkpoint as
            # the connection closes): one line, not DuckDB's message 40 lines down.
            stack.enter_context(space(self.path.parent))
            with self._hold(con, read_only=False):
                ready = (self.path.resolve(), self.path.stat().st_ino)
                if ready not in _SCHEMA_READY:
                    con.execute(SCHEMA)
                    _SCHEMA_READY.add(ready)
                yield con

    def _open_for_write(self, wait_s: float) -> duckdb.DuckDBPyConnection:
        """A read-write connection, waiting (up to `wait_s`) while a reader in another process
        has the file open: readers take no write lock, and DuckDB refuses a writer beside them."""
        import duckdb

        deadline = time.monotonic() + wait_s
        while True:
            try:
                with writable(self.path.parent):
                    return self._open(read_only=False)
            except duckdb.IOException:  # only a lock conflict gets here (see _open)
                if time.monotonic() > deadline:
                    raise StorageError(
                        self.path, f"busy: another process kept it open for over {wait_s:g} s"
                    ) from None
                time.sleep(0.05)

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection without the write lock; waits (up to `read_wait_s`) only
        while another process holds DuckDB's own lock for a write. Inside another read or
        write block, that block's connection."""
        import duckdb

        held = _held().get(self.path)
        if held is not None:
            yield held[0]
            return
        if not self.path.exists():
            raise StorageError(self.path, "no warehouse yet: run an evaluation first")
        limits = WarehouseLimits.from_env()
        deadline = time.monotonic() + limits.read_wait_s
        while True:
            try:
                con = self._open(read_only=True)
                break
            except duckdb.IOException:  # only a lock conflict gets here (see _open)
                if time.monotonic() > deadline:
                    raise StorageError(
                        self.path,
                        f"busy: another process has been writing it for over "
                        f"{limits.read_wait_s:g} s; try again when it is done"
                        + limits.hint("read_wait_s"),
                    ) from None
                time.sleep(0.1)
        with self._hold(con, read_only=True):
            yield con

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection whose statements commit together, or not at all; inside another
        transaction, part of it."""
        import duckdb

        with self.connect() as con:
            if con in _transactions():
                yield con
                return
            con.execute("BEGIN TRANSACTION")
            _transactions().add(con)
            try:
                yield con
                con.execute("COMMIT")
            except Exception as exc:
                # A failed COMMIT (a full disk) has ended the transaction already.
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                if disk_full(exc):
                    raise StorageError(self.path.parent, NO_SPACE) from None
                raise
            finally:
                _transactions().discard(con)

    def record_run(self, run: dict, results: dict[str, pd.DataFrame]) -> None:
        run = {"finished": False} | run
        with self.transaction() as con:
            for table in ("runs", *RESULT_TABLES):
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run["run_id"]])
            con.execute(
                f"INSERT INTO runs ({', '.join(run)}) VALUES ({', '.join('?' * len(run))})",
                list(run.values()),
            )
            for table, df in results.items():
                insert_rows(con, table, df)

    def replace_measures(self, run_id: str, like: str, tables: dict[str, pd.DataFrame]) -> None:
        with self.transaction() as con:
            for table, df in tables.items():
                sql = f"DELETE FROM {table} WHERE run_id = ? AND measure LIKE ?"
                con.execute(sql, [run_id, like])
                insert_rows(con, table, df)

    def append(self, table: str, rows: pd.DataFrame) -> None:
        if table not in APPENDED_TABLES:
            raise ValueError(f"{table!r} is not appended to")
        with self.connect() as con:
            insert_rows(con, table, rows)

    def finish(self, *, runs: str | None = None, gate_results: str | None = None) -> None:
        with self.connect() as con:
            if runs is not None:
                con.execute("UPDATE runs SET finished = true WHERE run_id = ?", [runs])
            if gate_results is not None:
                sql = "UPDATE gate_results SET finished = true WHERE gate_id = ?"
                con.execute(sql, [gate_results])


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame) -> None:
    """Append `df` to one of the result or appended tables, by column name."""
    if table not in RESULT_TABLES + APPENDED_TABLES:
        raise ValueError(f"unknown result table {table!r}")
    if len(df):
        con.register("incoming", df)
        cols = ", ".join(f'"{c}"' for c in df.columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM incoming")
        con.unregister("incoming")
