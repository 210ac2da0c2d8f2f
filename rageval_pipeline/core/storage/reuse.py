"""Reusing work whose inputs did not change: content keys and a content-addressed table cache.

A stage's key hashes its code version with its inputs' contents, so a warm re-run finds the
same key and reuses the stored result instead of recomputing it. The keys live in the storage
folder, not in Dagster's instance, so reuse also works for a `dagster job execute` without a
`DAGSTER_HOME` (a temporary instance). Everything is written atomically (core.storage.warehouse),
in a local folder or on object storage (core.storage.location).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from rageval_pipeline.core.storage.files import write_parquet, write_text
from rageval_pipeline.core.storage.location import is_remote, read_parquet

if TYPE_CHECKING:
    from upath import UPath


def content_key(*parts: object) -> str:
    """A digest of JSON-serialisable parts (code versions, other keys, settings)."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# file -> ((size, mtime_ns), SHA-256): a file read by several steps of one process is hashed once.
_DIGESTS: dict[Path, tuple[tuple[int, int], str]] = {}


def file_digest(path: Path | UPath) -> str:
    """SHA-256 of a file's bytes (remembered while its size and mtime stay the same; on object
    storage, whose mtimes are whole seconds, hashed on every call)."""
    if is_remote(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()
    stat = path.stat()
    seen = _DIGESTS.get(path)
    if seen is not None and seen[0] == (stat.st_size, stat.st_mtime_ns):
        return seen[1]
    with path.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    _DIGESTS[path] = ((stat.st_size, stat.st_mtime_ns), digest)
    return digest


def folder_key(folder: Path) -> str:
    """A digest of every file under a folder: relative paths and contents."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return content_key([[p.relative_to(folder).as_posix(), file_digest(p)] for p in files])


class FrameCache:
    """The latest table of one stage (e.g. one system's chunks of one dataset), by key, with
    an optional JSON record beside it (e.g. the metadata the stage reported)."""

    def __init__(self, folder: Path | UPath) -> None:
        self.folder = folder

    def get(self, key: str) -> pd.DataFrame | None:
        path = self.folder / f"{key}.parquet"
        return read_parquet(path).to_pandas() if path.is_file() else None

    def record(self, key: str) -> dict | None:
        """The JSON record stored with `key`'s table; None when there is none."""
        try:
            return json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def put(self, key: str, df: pd.DataFrame, record: dict | None = None) -> None:
        """Store `df` (and `record`) under `key`, then drop older keys (only the latest is ever
        reused). The record is written first: a table is never found without its record."""
        if record is not None:
            write_text(self.folder / f"{key}.json", json.dumps(record, sort_keys=True))
        write_parquet(df, self.folder / f"{key}.parquet")
        for old in (*self.folder.glob("*.parquet"), *self.folder.glob("*.json")):
            if old.stem != key:
                old.unlink(missing_ok=True)


def read_stamp(path: Path | UPath) -> str | None:
    """The key a folder (e.g. an index) was built with; None when unknown."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def write_stamp(path: Path | UPath, key: str | None) -> None:
    """Record (or, with None, forget) the key of what was just built."""
    if key is None:
        path.unlink(missing_ok=True)
    else:
        write_text(path, key + "\n")
