"""A folder is a local path or, for the storage folder only, an fsspec URL; never a URL taken
for a local path.

`Path("s3://bucket/eval")` is the relative path `s3:/bucket/eval`: a run given an object-store
URL would write everything to a local folder of that name and succeed. So every
value that looks like a URL (`scheme://`) is told apart before `Path` sees it: the data and
baselines folders refuse it (`url_problem`); the storage folder takes it when its scheme is
one we support and its fsspec package is installed (`storage_problem`), and becomes a `UPath`
(`storage_location`). No pydantic nor fsspec imported here, so the CLI checks its options at
no cost.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from upath import UPath

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Object stores whose PUT is atomic (core.storage.location relies on it), and the package
# holding their fsspec filesystem. `file://` is a local folder. Google Cloud Storage (gs://,
# gcsfs) is not one: gcsfs's errors are neither mapped to one line (core.storage.faults) nor
# tested, so it is refused by name rather than failing with a trace.
OBJECT_STORES = {"s3": "s3fs"}
UNSUPPORTED = {"gs", "gcs"}


def _shown(value: str) -> str:
    """The URL without its `user:password@` part nor its query, which may hold credentials."""
    parts = urlsplit(value)
    return repr(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}")


def url_problem(value: str, what: str = "folder") -> str | None:
    """Why `value` cannot name a local `what` (folder, file), or None when it can."""
    if not _URL.match(value):
        return None
    return f"{_shown(value)} is a URL; give a local {what} (only the storage folder may be a URL)"


def storage_problem(value: str) -> str | None:
    """Why `value` cannot be the storage folder, or None: a local path, a `file://` URL, or an
    object-store URL whose fsspec package is installed and which carries no credentials (they
    come from the environment the package reads, e.g. AWS_ACCESS_KEY_ID)."""
    if not _URL.match(value):
        return None
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return None
    if scheme in UNSUPPORTED:
        return (
            f"{_shown(value)}: {scheme}:// (Google Cloud Storage) is not supported for storage: "
            f"its failures are not turned into one line nor tested here; give a local folder "
            f"or an s3:// URL (any S3-compatible store, through AWS_ENDPOINT_URL)"
        )
    if scheme not in OBJECT_STORES:
        return (
            f"{_shown(value)}: {scheme}:// is not supported for storage; give a local folder "
            f"or an s3:// URL"
        )
    if "@" in parts.netloc or parts.query:
        return (
            f"{_shown(value)}: credentials do not go in the URL; set them in the environment "
            f"{OBJECT_STORES[scheme]} reads (docs/deploy.md, Object storage)"
        )
    package = OBJECT_STORES[scheme]
    if importlib.util.find_spec(package) is None:
        return f"{_shown(value)} needs {package}, which is not installed: pip install {package}"
    if not parts.netloc:
        return f"{_shown(value)} names no bucket"
    return None


def local_folder(storage: Path | UPath, scratch: Path) -> Path:
    """The local folder for a storage folder's files that must be local (its DuckDB file,
    extracted datasets): the folder itself, or for a URL `<scratch>/s3/bucket/eval`."""
    if isinstance(storage, Path):
        return storage
    return scratch / storage.protocol / storage.path


def storage_location(value: str) -> Path | UPath:
    """The storage folder `value` names (checked by `storage_problem` first): a resolved local
    `Path`, else a `UPath` on object storage."""
    if not _URL.match(value):
        return Path(value).resolve()
    scheme = urlsplit(value).scheme.lower()  # schemes are case-insensitive; fsspec's are not
    if scheme == "file":
        return Path(urlsplit(value).path).resolve()
    from upath import UPath

    from rageval_pipeline.core.settings.limits import ObjectStoreLimits

    url = scheme + value[len(scheme) :].rstrip("/")
    if scheme != "s3":
        return UPath(url)
    path = UPath(url, **ObjectStoreLimits.from_env().s3fs_options())
    # s3fs retries some errors itself, 5 times over botocore's tries; it takes no argument
    # for it, but these options make a filesystem of its own (fsspec caches one per options).
    path.fs.retries = 1
    return path
