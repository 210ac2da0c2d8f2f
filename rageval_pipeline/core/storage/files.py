"""Files and folders written atomically, on a local folder or object storage: readers never see
half a file or a mix of two folders, and a failed write leaves the old one as it was.

`atomic_path` and `atomic_dir` are the two primitives (a temp file or folder beside the target,
renamed over it; on object storage a local temp uploaded in one PUT, or published files first
and manifest last: `core.storage.location`); `write_text` and `write_parquet` are what most
callers need. A refused write or a full disk is one `StorageError` naming the folder
(`writable`). Temp files and folders of killed writes are removed by the next write to the same
folder (`core.storage.locks`).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rageval_pipeline.core.storage import locks
from rageval_pipeline.core.storage.location import (
    StorageError,
    as_location,
    is_remote,
    published,
    uploaded,
    write_manifest,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from upath import UPath

READ_ONLY = "storage is read-only here: point RAGEVAL_STORAGE at a writable folder"
NO_SPACE = (
    "no space left on the device; nothing half-written was kept: free space (docs/deploy.md, "
    '"Full disk") and run again'
)


def disk_full(exc: BaseException) -> bool:
    """A full disk, as the OS (errno), pyarrow or DuckDB (their messages) report it."""
    return getattr(exc, "errno", None) == errno.ENOSPC or "No space left on device" in str(exc)


@contextmanager
def writable(folder: Path | str) -> Iterator[None]:
    """Turn a refused write under `folder`, or a full disk, into one line naming it."""
    try:
        yield
    except OSError as exc:
        if disk_full(exc):
            raise StorageError(folder, NO_SPACE) from None
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise StorageError(folder, READ_ONLY) from None


@contextmanager
def space(folder: Path) -> Iterator[None]:
    """Turn a full disk while writing under `folder` (as the OS, pyarrow or DuckDB say it)
    into one line naming it."""
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        if disk_full(exc):
            raise StorageError(folder, NO_SPACE) from None
        raise


def _temp_prefix(path: Path) -> str:
    """Ready `path`'s folder for a temp entry beside it (made, orphans of killed writers swept)
    and return the temp's name prefix, which names this writer (`locks.writer_tag`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    locks.sweep_orphans(path.parent)
    return f".{path.name}.{locks.writer_tag()}."


@contextmanager
def atomic_path(path: Path | UPath) -> Iterator[Path]:
    """Yield a temp path beside `path`; rename it over `path` only if the block succeeds, so
    readers never see half a file and a failed write leaves the old file as it was. On object
    storage the temp file is local and uploaded in one PUT."""
    if is_remote(path):
        with writable(path.parent), uploaded(path) as tmp:
            yield tmp
        return
    with writable(path.parent):
        fd, name = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    locks.claim(fd)
    tmp = Path(name)
    try:
        with space(path.parent):
            yield tmp
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports from other users
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        os.close(fd)


@contextmanager
def atomic_dir(path: Path | UPath) -> Iterator[Path]:
    """Yield a temp folder beside `path`; when the block succeeds, record every file's size in
    a manifest and swap the folder in for `path`. Readers see the old folder, briefly none,
    or the new one, never a mix; a failed write leaves the old folder as it was. On object
    storage the temp folder is local, then published files first and manifest last."""
    if is_remote(path):
        with writable(path.parent), published(path) as tmp:
            yield tmp
        return
    with writable(path.parent):
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent))
    fd = os.open(tmp, os.O_RDONLY)
    locks.claim(fd)
    old = tmp.with_suffix(".old")
    try:
        with space(path.parent):
            yield tmp
        write_manifest(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp's 0700, as for files
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
        os.close(fd)


def write_parquet(df: pd.DataFrame | pa.Table, path: Path | UPath) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = df if isinstance(df, pa.Table) else pa.Table.from_pandas(df, preserve_index=False)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_text(path: Path | UPath, text: str) -> None:
    with atomic_path(as_location(path)) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
