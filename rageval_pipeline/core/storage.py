"""Where results live: Parquet files written atomically, and one DuckDB warehouse file.

DuckDB allows one writing process per file, and a reader is refused while another process
writes. Within one Dagster instance the writers (`<system>/metrics`, `gate`) take turns through
the concurrency pool `duckdb_write` (docs/deploy.md). The `flock` that `Warehouse.connect` holds
on a lock file beside the database, for the (short) life of a connection, covers what Dagster
cannot see: the `rageval` CLI, runs on separate instances (two `dagster job execute` without a
shared DAGSTER_HOME, whose pools are not shared), and instances without a pool limit (the local
SQLite default). Uncontended under the pool, it costs nothing.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rageval_pipeline.core.errors import InputError

WAREHOUSE_FILE = "rageval.duckdb"

# Long format (`measure`, `value`): a new measure needs no schema change.
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, dataset VARCHAR, split VARCHAR, system VARCHAR,
    fingerprint VARCHAR, level VARCHAR, k INTEGER, n_queries INTEGER,
    dagster_run_id VARCHAR, created_at TIMESTAMP, config VARCHAR
);
CREATE TABLE IF NOT EXISTS run_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    measure VARCHAR, value DOUBLE, created_at TIMESTAMP, ci_low DOUBLE, ci_high DOUBLE
);
CREATE TABLE IF NOT EXISTS query_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    query_id VARCHAR, measure VARCHAR, value DOUBLE
);
CREATE TABLE IF NOT EXISTS group_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    attribute VARCHAR, "group" VARCHAR, measure VARCHAR, value DOUBLE, n_queries INTEGER,
    ci_low DOUBLE, ci_high DOUBLE
);
-- Warehouses written before the 95% intervals (ci_low, ci_high) existed gain the columns.
ALTER TABLE run_metrics ADD COLUMN IF NOT EXISTS ci_low DOUBLE;
ALTER TABLE run_metrics ADD COLUMN IF NOT EXISTS ci_high DOUBLE;
ALTER TABLE group_metrics ADD COLUMN IF NOT EXISTS ci_low DOUBLE;
ALTER TABLE group_metrics ADD COLUMN IF NOT EXISTS ci_high DOUBLE;
CREATE TABLE IF NOT EXISTS latency (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    attribute VARCHAR, "group" VARCHAR, stat VARCHAR, value DOUBLE
);
CREATE OR REPLACE VIEW history AS
    SELECT r.created_at, r.dataset, r.split, r.system, r.fingerprint, r.level, r.run_id,
           m.measure, m.value
    FROM runs r JOIN run_metrics m USING (run_id);
CREATE TABLE IF NOT EXISTS gate_results (
    gate_id VARCHAR PRIMARY KEY, dagster_run_id VARCHAR, created_at TIMESTAMP,
    passed BOOLEAN, categories VARCHAR, summary VARCHAR, report_json VARCHAR
);
"""

RESULT_TABLES = ("run_metrics", "query_metrics", "group_metrics", "latency")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path beside `path`; rename it over `path` only if the block succeeds, so
    readers never see half a file and a failed write leaves the old file as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports from other users
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_parquet(df: pd.DataFrame | pa.Table, path: Path) -> None:
    table = df if isinstance(df, pa.Table) else pa.Table.from_pandas(df, preserve_index=False)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_text(path: Path, text: str) -> None:
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


class Warehouse:
    """The DuckDB file holding every run's tables, with history across runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def existing(cls, storage: Path) -> Warehouse:
        """The warehouse of a storage folder; InputError when nothing was evaluated there yet."""
        path = storage / WAREHOUSE_FILE
        if not path.exists():
            raise InputError(path, "no warehouse yet: run an evaluation first")
        return cls(path)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            con = duckdb.connect(str(self.path))
            try:
                con.execute(SCHEMA)
                yield con
            finally:
                con.close()
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection whose statements commit together, or not at all."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise

    def record_run(self, run: dict, results: dict[str, pd.DataFrame]) -> None:
        """Insert one run and its result tables in one transaction (replacing a same run_id)."""
        with self.transaction() as con:
            for table in ("runs", *RESULT_TABLES):
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run["run_id"]])
            con.execute(
                f"INSERT INTO runs ({', '.join(run)}) VALUES ({', '.join('?' * len(run))})",
                list(run.values()),
            )
            for table, df in results.items():
                insert_rows(con, table, df)

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        with self.connect() as con:
            return con.execute(sql, params or []).df()

    def record_gate(self, row: dict) -> None:
        with self.connect() as con:
            con.execute(
                f"INSERT INTO gate_results ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()),
            )


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame) -> None:
    """Append `df` to one of the result tables, by column name."""
    if table not in RESULT_TABLES:
        raise ValueError(f"unknown result table {table!r}")
    if len(df):
        con.register("incoming", df)
        cols = ", ".join(f'"{c}"' for c in df.columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM incoming")
        con.unregister("incoming")
