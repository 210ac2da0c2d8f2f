"""Where results live: atomic files and folders on a local folder or object storage, the
warehouse (one DuckDB file, or a lake of Parquet files; `choose.open_warehouse`) and its
schema, the cross-process locks, and content-addressed reuse of work whose inputs did not
change.
"""

from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.storage.files import atomic_dir, atomic_path, write_parquet, write_text
from rageval_pipeline.core.storage.location import StorageError, verified_dir
from rageval_pipeline.core.storage.reuse import FrameCache, content_key, file_digest, folder_key
from rageval_pipeline.core.storage.warehouse import Warehouse, insert_rows

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
    "open_warehouse",
    "verified_dir",
    "write_parquet",
    "write_text",
]
