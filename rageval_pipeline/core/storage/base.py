"""What every warehouse offers, whichever holds the tables: the DuckDB file
(`core.storage.warehouse.Warehouse`) or the lake of Parquet files (`core.storage.lake.Lake`).
Callers get one from `core.storage.choose.open_warehouse` and use only this interface: reads
are DuckDB SQL over the tables and views of `core.storage.schema`; writes are the methods
below, so neither kind needs the other's way of replacing rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    import duckdb


class BaseWarehouse(ABC):
    """Runs' tables with history across runs. A run's `runs` row and a verdict's
    `gate_results` row stay unfinished (hidden from history, the gate and reuse) until
    `finish` is called for them, the writer's last act."""

    owner: str  # what this process is, named to whoever waits for it

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the tables are, as people write it (a file, a folder or a URL)."""

    @abstractmethod
    def read(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A DuckDB connection for SQL reads of the tables; blocks nested in it share it."""

    @abstractmethod
    def connect(self) -> AbstractContextManager[Any]:
        """A write block: the writes inside it share one connection (DuckDB) or one commit
        (lake)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """A write block whose writes are kept together, or not at all."""

    @abstractmethod
    def record_run(self, run: dict, results: dict[str, pd.DataFrame]) -> None:
        """Record one run and its result tables at once, replacing a same run_id; unless
        `run` says otherwise, unfinished until `finish(runs=...)`."""

    @abstractmethod
    def replace_measures(self, run_id: str, like: str, tables: dict[str, pd.DataFrame]) -> None:
        """Replace, in each result table named, the rows of `run_id` whose measure matches the
        SQL pattern `like` with the given rows, at once."""

    @abstractmethod
    def append(self, table: str, rows: pd.DataFrame) -> None:
        """Add rows to a table only ever appended to (schema.APPENDED_TABLES), by column name."""

    @abstractmethod
    def finish(self, *, runs: str | None = None, gate_results: str | None = None) -> None:
        """Mark a run (by run_id) or a verdict (by gate_id) finished."""

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        with self.read() as con:
            return con.execute(sql, params or []).df()

    def record_gate(self, row: dict) -> None:
        """Record a verdict; unless `row` says otherwise, unfinished until
        `finish(gate_results=...)`."""
        self.append("gate_results", pd.DataFrame([{"finished": False} | row]))

    def record_reuse(self, run_id: str, dagster_run_id: str, created_at: datetime) -> bool:
        """Note that a Dagster run reused stored run `run_id`; False (nothing written) when
        that run is not stored (any more, or not finished), so it must be measured again."""
        with self.connect():
            sql = "SELECT count(*) AS n FROM runs WHERE run_id = ? AND finished"
            if not self.query(sql, [run_id])["n"][0]:
                return False
            row = dict(run_id=run_id, dagster_run_id=dagster_run_id, created_at=created_at)
            self.append("run_reuses", pd.DataFrame([row]))
            return True
