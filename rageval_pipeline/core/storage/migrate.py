"""Copy one warehouse into another, e.g. a DuckDB file's history into a new lake
(`rageval to-lake`): every run with its result tables, and every reuse, verdict and
experiment, as the same facts (finished or not), in one commit of the target."""

from __future__ import annotations

import pandas as pd

from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.schema import APPENDED_TABLES, RESULT_TABLES

_EXISTING = "SELECT table_name FROM information_schema.tables"


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Missing values as None, which every column type takes (NaN would become 'nan' text)."""
    return frame.astype(object).where(frame.notna(), None)


def copy(source: BaseWarehouse, target: BaseWarehouse) -> int:
    """Record what `source` holds in `target`; the number of runs copied. Tables a warehouse
    written by an older version lacks are skipped."""
    with source.read() as con:
        existing = set(con.execute(_EXISTING).df()["table_name"])
        runs = _rows(con.execute("SELECT * FROM runs ORDER BY created_at, run_id").df())
        results = {
            t: con.execute(f"SELECT * FROM {t}").df() for t in RESULT_TABLES if t in existing
        }
        appended = {
            t: con.execute(f"SELECT * FROM {t} ORDER BY created_at").df()
            for t in APPENDED_TABLES
            if t in existing
        }
    by_run = {t: dict(tuple(df.groupby("run_id"))) for t, df in results.items()}
    with target.transaction():
        for run in runs.to_dict("records"):
            run_id = run["run_id"]
            target.record_run(
                run, {t: rows[run_id] for t, rows in by_run.items() if run_id in rows}
            )
        for table, frame in appended.items():
            target.append(table, frame)
    return len(runs)
