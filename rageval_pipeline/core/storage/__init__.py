"""Where results live: atomic files and folders, the warehouse (one DuckDB file, or a lake of
Parquet files; `choose.open_warehouse`) and its schema, the cross-process locks, and
content-addressed reuse of work whose inputs did not change.
"""

from rageval_pipeline.core.storage.reuse import FrameCache, content_key, file_digest, folder_key
from rageval_pipeline.core.storage.warehouse import (
    StorageError,
    Warehouse,
    atomic_dir,
    atomic_path,
    insert_rows,
    verified_dir,
    write_parquet,
    write_text,
)

__all__ = [
    "FrameCache",
    "StorageError",
    "Warehouse",
    "atomic_dir",
    "atomic_path",
    "content_key",
    "file_digest",
    "folder_key",
    "insert_rows",
    "verified_dir",
    "write_parquet",
    "write_text",
]
