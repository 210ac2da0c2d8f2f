"""The warehouse: one DuckDB file, many concurrent writers, no lock errors, no partial rows."""

from __future__ import annotations

import multiprocessing as mp
import threading
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from rageval_pipeline.core.storage.files import write_parquet
from rageval_pipeline.core.storage.warehouse import Warehouse


def _run_row(run_id: str) -> dict:
    return dict(
        run_id=run_id,
        dataset="d",
        split="test",
        system="s",
        fingerprint="f",
        level="document",
        k=10,
        n_queries=2,
        dagster_run_id="dr",
        created_at=datetime.now(UTC),
        config="{}",
        finished=True,  # a complete evaluation, as store_results leaves it
    )


def _results(run_id: str, value: float) -> dict[str, pd.DataFrame]:
    keys = dict(run_id=run_id, dataset="d", split="test", system="s")
    return {
        "run_metrics": pd.DataFrame(
            {"measure": ["nDCG@10"], "value": [value], "created_at": [datetime.now(UTC)], **keys}
        ),
        "query_metrics": pd.DataFrame(
            {"query_id": ["q1", "q2"], "measure": ["RR", "RR"], "value": [1.0, 0.5], **keys}
        ),
    }


def _writer(path: str, worker: int) -> None:
    warehouse = Warehouse(Path(path))
    for i in range(5):
        run_id = f"w{worker}-{i}"
        warehouse.record_run(_run_row(run_id), _results(run_id, worker + i / 10))


def test_parallel_processes_never_hit_a_lock_error(tmp_path):
    path = tmp_path / "rageval.duckdb"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    warehouse = Warehouse(path)
    assert warehouse.query("SELECT count(*) AS n FROM runs")["n"][0] == 20
    assert warehouse.query("SELECT count(*) AS n FROM query_metrics")["n"][0] == 40


def test_rerecording_a_run_replaces_it(tmp_path):
    warehouse = Warehouse(tmp_path / "w.duckdb")
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    warehouse.record_run(_run_row("r1"), _results("r1", 0.2))
    got = warehouse.query("SELECT value FROM run_metrics WHERE run_id = 'r1'")
    assert got["value"].tolist() == [0.2]


def test_failed_record_leaves_nothing_half_written(tmp_path):
    warehouse = Warehouse(tmp_path / "w.duckdb")
    bad = _results("r2", 0.3) | {"not_a_table": pd.DataFrame({"x": [1]})}
    with pytest.raises(ValueError, match="unknown result table"):
        warehouse.record_run(_run_row("r2"), bad)
    assert warehouse.query("SELECT count(*) AS n FROM runs")["n"][0] == 0
    assert warehouse.query("SELECT count(*) AS n FROM run_metrics")["n"][0] == 0


def test_write_parquet_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "t.parquet"
    write_parquet(pd.DataFrame({"a": [1]}), target)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_parquet(pd.DataFrame({"a": [2]}), target)
    assert pq.read_table(target).to_pandas()["a"].tolist() == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_the_schema_is_created_once_per_process_and_file(tmp_path):
    warehouse = Warehouse(tmp_path / "w.duckdb")
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    assert len(warehouse.query("SELECT * FROM history")) == 1
    with warehouse.connect() as con:
        con.execute("DROP VIEW history")
    # Later connections of this process do not run the schema again...
    warehouse.record_run(_run_row("r2"), _results("r2", 0.2))
    with pytest.raises(duckdb.CatalogException, match="history does not exist"):
        warehouse.query("SELECT * FROM history")
    # ...but another file gets its own.
    other = Warehouse(tmp_path / "other.duckdb")
    other.record_run(_run_row("r3"), _results("r3", 0.3))
    assert other.query("SELECT run_id FROM history")["run_id"].tolist() == ["r3"]


def test_reads_are_read_only_connections(tmp_path):
    warehouse = Warehouse(tmp_path / "w.duckdb")
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    with warehouse.read() as con, pytest.raises(duckdb.InvalidInputException, match="read-only"):
        con.execute("DELETE FROM runs")
    assert warehouse.query("SELECT count(*) AS n FROM runs")["n"][0] == 1


def test_blocks_nested_in_a_read_or_a_write_share_its_connection(tmp_path, monkeypatch):
    warehouse = Warehouse(tmp_path / "w.duckdb")
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    opened, real = [], Warehouse._open
    monkeypatch.setattr(
        Warehouse, "_open", lambda self, **kw: opened.append(kw["read_only"]) or real(self, **kw)
    )
    count = "SELECT count(*) AS n FROM runs"
    with warehouse.read() as con:
        with warehouse.read() as inner:
            assert inner is con
        assert warehouse.query(count)["n"][0] == 1
        # Another thread gets a connection of its own (DuckDB's are not for sharing).
        other = threading.Thread(target=lambda: warehouse.query(count))
        other.start()
        other.join()
        # DuckDB refuses a read-write open beside a read-only one: say so plainly.
        with pytest.raises(RuntimeError, match="a write inside a read block"), warehouse.connect():
            pass
    assert opened == [True, True]
    with warehouse.connect() as con:
        # The write lock is not taken twice (a second flock would wait for ever).
        warehouse.record_run(_run_row("r2"), _results("r2", 0.2))
        assert warehouse.query(count)["n"][0] == 2
        with warehouse.read() as inner:
            assert inner is con
    assert opened == [True, True, False]
    assert warehouse.query(count)["n"][0] == 2  # closed with its block: a new read opens
    assert opened == [True, True, False, True]


def test_a_warehouse_written_before_intervals_gains_the_ci_columns(tmp_path: Path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE run_metrics (run_id VARCHAR, dataset VARCHAR, split VARCHAR, "
        "system VARCHAR, measure VARCHAR, value DOUBLE, created_at TIMESTAMP)"
    )
    con.execute("INSERT INTO run_metrics VALUES ('old', 'd', 'test', 's', 'RR', 0.5, NULL)")
    con.close()
    warehouse = Warehouse(path)
    # Reads open the file read-only and change nothing; the first write connection migrates.
    with pytest.raises(duckdb.BinderException, match="ci_low"):
        warehouse.query("SELECT ci_low FROM run_metrics")
    with warehouse.connect():
        pass
    rows = warehouse.query("SELECT run_id, value, ci_low, ci_high FROM run_metrics")
    assert rows["run_id"].tolist() == ["old"] and rows["ci_low"].isna().all()
    columns = warehouse.query("DESCRIBE group_metrics")["column_name"].tolist()
    assert columns[-2:] == ["ci_low", "ci_high"]


def test_rageval_history_prints_the_latest_evaluations_oldest_first(tmp_path, capsys):
    from rageval_pipeline.cli import main

    warehouse = Warehouse(tmp_path / "rageval.duckdb")
    for n, value in enumerate((0.1, 0.2, 0.3)):
        row = _run_row(f"r{n}") | {"created_at": datetime(2026, 1, 1 + n, tzinfo=UTC)}
        warehouse.record_run(row, _results(f"r{n}", value))
    argv = ["history", "--dataset", "d", "--limit", "2", "--storage", str(tmp_path)]
    assert main(argv) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(line[0][:10], line[-1]) for line in lines] == [
        ("2026-01-02", "0.2000"),
        ("2026-01-03", "0.3000"),
    ]
    assert main([*argv[:-2], "--system", "other", "--storage", str(tmp_path)]) == 2
