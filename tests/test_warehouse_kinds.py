"""The warehouse's contract, held by both kinds (the DuckDB file and the lake of Parquet
files): what callers rely on whichever `open_warehouse` returns."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.generation import correctness
from rageval_pipeline.core.history.summaries import history, select_runs
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.storage.lake import Lake
from rageval_pipeline.core.storage.warehouse import StorageError
from tests.test_storage import _results, _run_row

KINDS = ("duckdb", "lake")


@pytest.fixture(params=KINDS)
def warehouse(request, tmp_path: Path) -> BaseWarehouse:
    return open_warehouse(tmp_path, kind=request.param)


def _count(warehouse: BaseWarehouse, sql: str, params: list | None = None) -> int:
    return int(warehouse.query(f"SELECT count(*) AS n FROM ({sql})", params)["n"][0])


def test_the_setting_and_a_non_local_storage_choose_the_kind(tmp_path, monkeypatch):
    from upath import UPath

    assert type(open_warehouse(tmp_path)).__name__ == "Warehouse"
    monkeypatch.setenv("RAGEVAL_WAREHOUSE", "lake")
    lake = open_warehouse(tmp_path)
    assert isinstance(lake, Lake) and lake.root == str(tmp_path / "lake")
    monkeypatch.setenv("RAGEVAL_WAREHOUSE", "duckdb")
    # Only the lake works on an object store: a URL's storage picks it whatever the setting.
    memory = open_warehouse(UPath("memory://bucket/eval"))
    assert isinstance(memory, Lake) and memory.location == "memory:///bucket/eval/lake"


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_warehouse_is_refused_to_readers_and_has_typed_empty_tables(tmp_path, kind):
    with pytest.raises(StorageError, match="no warehouse yet"):
        open_warehouse(tmp_path, kind=kind, existing=True)
    warehouse = open_warehouse(tmp_path, kind=kind)
    warehouse.record_run(_run_row("r1"), {})
    columns = warehouse.query("DESCRIBE ppi_metrics")[["column_name", "column_type"]]
    assert warehouse.query("SELECT * FROM ppi_metrics").empty
    assert ("effective_n", "DOUBLE") in set(columns.itertuples(index=False, name=None))


def test_recording_a_run_again_replaces_it_and_only_it(warehouse):
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    warehouse.record_run(_run_row("r2"), _results("r2", 0.5))
    warehouse.record_run(_run_row("r1"), _results("r1", 0.2))
    got = warehouse.query("SELECT run_id, value FROM run_metrics ORDER BY run_id")
    assert got.to_dict("records") == [
        {"run_id": "r1", "value": 0.2},
        {"run_id": "r2", "value": 0.5},
    ]
    assert _count(warehouse, "SELECT * FROM query_metrics") == 4
    assert _count(warehouse, "SELECT * FROM runs") == 2


def test_a_run_is_hidden_until_finished_and_again_when_recorded_anew(warehouse):
    row = _run_row("r1") | {"finished": False}
    warehouse.record_run(row, _results("r1", 0.1))
    assert select_runs(warehouse).empty and history(warehouse, "d").empty
    assert not warehouse.record_reuse("r1", "dagster-2", datetime.now(UTC))
    warehouse.finish(runs="r1")
    assert select_runs(warehouse)["run_id"].tolist() == ["r1"]
    assert history(warehouse, "d")["value"].tolist() == [0.1]
    # Recorded again (a re-run killed before its end): unfinished until finished again.
    warehouse.record_run(row, _results("r1", 0.3))
    assert select_runs(warehouse).empty
    warehouse.finish(runs="r1")
    assert history(warehouse, "d")["value"].tolist() == [0.3]


def test_reuses_select_the_reused_run_for_the_reusing_dagster_run(warehouse):
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    assert not warehouse.record_reuse("no-such-run", "dagster-2", datetime.now(UTC))
    assert warehouse.record_reuse("r1", "dagster-2", datetime.now(UTC))
    assert select_runs(warehouse, dagster_run_id="dagster-2")["run_id"].tolist() == ["r1"]
    assert select_runs(warehouse, dagster_run_id="dagster-3").empty


def test_a_verdict_is_unfinished_until_finished(warehouse):
    with warehouse.connect():  # as the gate writes: one block
        warehouse.record_gate(dict(gate_id="g1", dagster_run_id="dr", passed=True, summary="ok"))
    sql = "SELECT gate_id, passed, finished FROM gate_results"
    assert warehouse.query(sql).to_dict("records") == [
        {"gate_id": "g1", "passed": True, "finished": False}
    ]
    warehouse.finish(gate_results="g1")
    assert warehouse.query(sql)["finished"].tolist() == [True]


def test_answer_correctness_replaces_its_own_rows_and_keeps_the_runs(warehouse):
    warehouse.record_run(_run_row("r1"), _results("r1", 0.1))
    keys = dict(run_id="r1", dataset="d", split="test", system="s")
    for rate in (0.25, 0.75):
        rows = {
            "run_metrics": pd.DataFrame(dict(measure=["AnswerCorrectness"], value=[rate])),
            "query_metrics": pd.DataFrame(
                dict(query_id=["q1"], measure=["AnswerCorrectness"], value=[rate])
            ),
        }
        correctness.record(warehouse, keys, rows, datetime.now(UTC))
    got = warehouse.query("SELECT measure, value FROM run_metrics ORDER BY measure")
    assert got.to_dict("records") == [
        {"measure": "AnswerCorrectness", "value": 0.75},
        {"measure": "nDCG@10", "value": 0.1},
    ]
    assert _count(warehouse, "SELECT * FROM query_metrics") == 3


def test_a_write_failing_half_way_leaves_nothing(warehouse):
    bad = _results("r2", 0.3) | {"not_a_table": pd.DataFrame({"x": [1]})}
    with pytest.raises(ValueError, match="unknown result table"):
        warehouse.record_run(_run_row("r2"), bad)
    with pytest.raises(RuntimeError, match="stopped"), warehouse.transaction():
        warehouse.record_run(_run_row("r3"), _results("r3", 0.3))
        raise RuntimeError("stopped")
    for table in ("runs", "run_metrics", "query_metrics"):
        assert _count(warehouse, f"SELECT * FROM {table}") == 0
