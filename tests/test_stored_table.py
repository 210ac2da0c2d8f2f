"""A stage's upstream table as ParquetIOManager stored it: found by `Settings.stored`, read only
on demand, keyed by its file."""

import dagster as dg
import pandas as pd
import pytest

from rageval_pipeline.core.storage.warehouse import StorageError
from rageval_pipeline.defs.resources import ParquetIOManager, Settings, StoredTable

seen: list[tuple[StoredTable, str, int]] = []


@dg.asset
def table(context: dg.AssetExecutionContext) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": ["d1", "d2"], "text": [context.run.run_id, "same"]})


@dg.asset(deps=[table])
def reader(settings: Settings) -> None:
    stored = settings.stored("table", partition=None)
    seen.append((stored, stored.key, stored.rows))


def _materialize(tmp_path, selection):
    resources = {
        "io_manager": ParquetIOManager(base_dir=str(tmp_path)),
        "settings": Settings(storage_dir=str(tmp_path)),
    }
    result = dg.materialize([table, reader], resources=resources, selection=selection)
    assert result.success


def test_a_stored_table_is_read_only_on_demand_and_keyed_by_its_file(tmp_path):
    seen.clear()
    _materialize(tmp_path, None)
    _materialize(tmp_path, ["reader"])  # the table is not rewritten: same key
    _materialize(tmp_path, None)  # rewritten with other rows: a new key
    (first, key, rows), (_, key_again, _), (rewritten, new_key, _) = seen
    assert "frame" not in vars(first)  # nothing read until asked
    assert first.path == tmp_path / "assets" / "table" / "all.parquet" and rows == 2
    assert key == key_again != new_key
    pd.testing.assert_frame_equal(rewritten.frame, pd.read_parquet(rewritten.path))


def test_a_missing_table_names_what_to_materialize(tmp_path):
    with pytest.raises(StorageError, match="materialize bm25/run for this partition first"):
        Settings(storage_dir=str(tmp_path)).stored("bm25", "run", partition="scifact")
