"""Resources: where things live (settings) and how asset tables are stored (Parquet IO)."""

import os
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow.parquet as pq

from rageval_pipeline.core.storage import WAREHOUSE_FILE, Warehouse, write_parquet

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _env_path(name: str, default: Path) -> str:
    return str(Path(os.environ.get(name) or default).resolve())


class Settings(dg.ConfigurableResource):
    """Paths and run-wide knobs. Defaults come from the environment, so CI and the UI agree:
    RAGEVAL_STORAGE (everything the pipeline writes), RAGEVAL_DATA (committed inputs: suites,
    systems.yaml, gate.yaml), RAGEVAL_BASELINES (baseline files), RAGEVAL_BEIR_MIRROR."""

    storage_dir: str
    data_dir: str
    baselines_dir: str
    beir_mirror: str | None = None
    top_k: int = 100
    split: str = "test"

    @classmethod
    def from_env(cls) -> "Settings":
        data = Path(_env_path("RAGEVAL_DATA", PROJECT_ROOT / "data"))
        return cls(
            storage_dir=_env_path("RAGEVAL_STORAGE", PROJECT_ROOT / "data" / "storage"),
            data_dir=str(data),
            baselines_dir=_env_path("RAGEVAL_BASELINES", data / "baselines"),
            beir_mirror=os.environ.get("RAGEVAL_BEIR_MIRROR") or None,
        )

    @property
    def storage(self) -> Path:
        return Path(self.storage_dir)

    @property
    def data(self) -> Path:
        return Path(self.data_dir)

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.storage / WAREHOUSE_FILE)

    def index_dir(self, system: str, dataset: str) -> Path:
        return self.storage / "indexes" / system / dataset

    @property
    def reports_dir(self) -> Path:
        return self.storage / "reports"


class ParquetIOManager(dg.ConfigurableIOManager):
    """Each asset partition's DataFrame as one Parquet file, written atomically."""

    base_dir: str

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path:
        key = context.asset_key.path
        part = context.asset_partition_key if context.has_asset_partitions else "all"
        return Path(self.base_dir, "assets", *key, f"{part}.parquet")

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        path = self._path(context)
        write_parquet(obj, path)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path)), "rows": len(obj)})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        path = self._path(context)
        if not path.exists():
            raise FileNotFoundError(
                f"{path} does not exist: materialize {context.asset_key.to_user_string()} "
                "for this partition first"
            )
        return pq.read_table(path).to_pandas()
