"""Where the storage folder is: a local `Path` (the default) or a `UPath` on object storage
(`RAGEVAL_STORAGE=s3://bucket/eval`, see core.settings.folders), and what the atomic writes of
`core.storage.warehouse` do on each.

A local folder keeps the local code path: a temp file or folder beside the target, then
`os.replace`. Object storage has no rename and no `flock`, so there:
- a file is written to a local temp file and uploaded in one PUT (`put`). S3 and GCS make an
  object visible whole when its upload completes: readers see the old object or the new one.
- a folder (an index) is published with its old manifest removed first, then its files, then
  its new manifest (`publish_dir`): meanwhile readers find it incomplete (`verified_dir`
  says so), never a mix. It is read back as a local copy, since bm25s and numpy read local
  files: downloaded once into the scratch folder under the remote files' checksums (ETags on
  S3), so reading it again downloads nothing (`local_copy`).
- no lock replaces `flock`: what goes there is content-addressed and immutable (embedding
  shards, stage tables by content key, runs by run id), or one object whose last writer wins
  (asset tables and their key stamps, reports). The DuckDB warehouse, which needs a local file
  and a lock, stays in the local scratch folder of the URL (`local_dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import paths
from rageval_pipeline.core.settings.folders import local_folder

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem
    from upath import UPath

MANIFEST = "manifest.json"  # file sizes of an atomically written folder, checked on reading
NO_BUCKET = "no such bucket: create it, or point RAGEVAL_STORAGE at one"


class StorageError(InputError):
    """The storage cannot be read or written as asked: one line, naming the file or folder."""


def is_remote(path: Path | UPath) -> bool:
    """True for a `UPath` on object storage; a local `Path` is never remote."""
    return not isinstance(path, PurePath)


def protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    return (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)


def is_local(fs: AbstractFileSystem) -> bool:
    return bool({"file", "local"} & set(protocols(fs)))


def as_location(value: str | os.PathLike | UPath) -> Path | UPath:
    """A `UPath` as it is, anything else as a local `Path`: what `Path(x)` was for, without
    folding `s3://` into a local `s3:/`."""
    return value if is_remote(value) else Path(value)


def local_dir(storage: Path | UPath) -> Path:
    """The local folder for what must be a local file: the storage folder itself, or for a
    URL its own folder under RAGEVAL_SCRATCH (`<scratch>/s3/bucket/eval`)."""
    return local_folder(storage, paths.scratch_dir())


@contextmanager
def uploaded(target: UPath) -> Iterator[Path]:
    """A local temp file, uploaded as `target` in one PUT when the block succeeds."""
    with tempfile.TemporaryDirectory(prefix="rageval-put-") as tmp:
        yield Path(tmp) / target.name
        with _bucket(target):
            target.fs.put_file(str(Path(tmp) / target.name), target.path)


@contextmanager
def published(target: UPath) -> Iterator[Path]:
    """A local temp folder, published as `target` with its manifest when the block succeeds."""
    with tempfile.TemporaryDirectory(prefix="rageval-dir-") as tmp:
        yield Path(tmp)
        write_manifest(Path(tmp))
        with _bucket(target):
            publish_dir(Path(tmp), target)


@contextmanager
def _bucket(target: UPath) -> Iterator[None]:
    """An upload finds no such file only when the bucket is missing (keys need no folders)."""
    try:
        yield
    except FileNotFoundError:
        bucket = f"{target.protocol}://{target.path.split('/')[0]}"
        raise StorageError(bucket, NO_BUCKET) from None


def write_manifest(folder: Path) -> None:
    """Record the size of every file of a finished folder (checked by `verified_dir`)."""
    sizes = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}
    (folder / MANIFEST).write_text(json.dumps(sizes, sort_keys=True))


def read_parquet(path: Path | UPath, columns: list[str] | None = None) -> pa.Table:
    if is_remote(path):
        return pq.read_table(path.path, columns=columns, filesystem=path.fs)
    return pq.read_table(path, columns=columns)


def parquet_rows(path: Path | UPath) -> int:
    if is_remote(path):
        return pq.read_metadata(path.path, filesystem=path.fs).num_rows
    return pq.read_metadata(path).num_rows


def publish_dir(local: Path, target: UPath) -> None:
    """Upload the finished folder `local` (its manifest written) as `target`: the old
    manifest goes first, then the old files, then the new files, the new manifest last."""
    fs, root = target.fs, target.path
    if fs.exists(f"{root}/{MANIFEST}"):
        fs.rm_file(f"{root}/{MANIFEST}")
    if fs.exists(root):
        fs.rm(root, recursive=True)
    files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    files.remove(MANIFEST)
    fs.put([str(local / f) for f in files], [f"{root}/{f}" for f in files])
    fs.put_file(str(local / MANIFEST), f"{root}/{MANIFEST}")
    fs.invalidate_cache(root)


def verified_dir(path: Path | UPath, rebuild: str) -> Path:
    """`path` (on object storage, its local copy) when every file its manifest lists is there
    at its recorded size; else a StorageError naming the first missing or truncated file, with
    `rebuild` as the remedy."""
    _verify(path, rebuild)
    return _verify(local_copy(path), rebuild) if is_remote(path) else path


def _verify(path: Path | UPath, rebuild: str) -> Path | UPath:
    manifest = path / MANIFEST
    try:
        sizes = json.loads(manifest.read_text())
    except FileNotFoundError:
        raise StorageError(path, f"missing or incomplete (no {MANIFEST}): {rebuild}") from None
    except (OSError, ValueError):
        raise StorageError(manifest, f"unreadable: {rebuild}") from None
    for name, size in sizes.items():
        file = path / name
        actual = file.stat().st_size if file.is_file() else None
        if actual is None:
            raise StorageError(file, f"missing: {rebuild}")
        if actual != size:
            raise StorageError(file, f"truncated or altered ({actual} of {size} bytes): {rebuild}")
    return path


def local_copy(remote: UPath) -> Path:
    """A local copy of the published folder `remote`, downloaded unless a copy of these very
    files (by checksum) is already in the scratch folder; older copies of it are removed."""
    fs, root = remote.fs, remote.path
    fs.invalidate_cache(root)
    files = sorted(f[len(root) + 1 :] for f in fs.find(root))
    version = json.dumps([[f, str(fs.checksum(f"{root}/{f}"))] for f in files])
    where = paths.scratch_dir() / "downloads" / hashlib.sha256(str(remote).encode()).hexdigest()
    copy = where / hashlib.sha256(version.encode()).hexdigest()[:32]
    if not (copy / MANIFEST).is_file():
        where.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".download.", dir=where))
        try:
            for f in files:
                (tmp / f).parent.mkdir(parents=True, exist_ok=True)
            fs.get([f"{root}/{f}" for f in files], [str(tmp / f) for f in files])
            os.replace(tmp, copy)
        except OSError:
            if not (copy / MANIFEST).is_file():  # else another process downloaded it first
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for old in where.iterdir():
        if old != copy and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return copy
