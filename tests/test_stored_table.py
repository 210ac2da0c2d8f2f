"""ParquetIOManager hands a `StoredTable`-typed input over unread, keyed by its stored file."""

import dagster as dg
import pandas as pd

from rageval_pipeline.dagster_defs.resources import ParquetIOManager, StoredTable

seen: list[StoredTable] = []


@dg.asset
def table(context: dg.AssetExecutionContext) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": ["d1", "d2"], "text": [context.run.run_id, "same"]})


@dg.asset(ins={"table": dg.AssetIn("table", dagster_type=StoredTable)})
def reader(table: StoredTable) -> None:
    seen.append(table)


def _materialize(tmp_path, selection):
    resources = {"io_manager": ParquetIOManager(base_dir=str(tmp_path))}
    result = dg.materialize([table, reader], resources=resources, selection=selection)
    assert result.success


def test_a_stored_table_is_read_only_on_demand_and_keyed_by_its_file(tmp_path):
    seen.clear()
    _materialize(tmp_path, None)
    _materialize(tmp_path, ["reader"])  # the table is not rewritten: same key
    _materialize(tmp_path, None)  # rewritten with other rows: a new key
    first, again, rewritten = seen
    assert "frame" not in vars(first)  # nothing read until asked
    assert first.path == tmp_path / "assets" / "table" / "all.parquet" and first.rows == 2
    assert first.key == again.key != rewritten.key
    pd.testing.assert_frame_equal(rewritten.frame, pd.read_parquet(rewritten.path))
