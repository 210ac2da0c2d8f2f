"""A folder the project reads or writes is a local path, never a URL taken for one.

`Path("s3://bucket/eval")` is the relative path `s3:/bucket/eval`: a run given an object-store
URL would write everything to a local folder of that name and succeed. Until storage through
fsspec exists (issue 27), a value that looks like a URL (`scheme://`, any scheme) is refused
before anything is written. No pydantic here, so the CLI checks its options at no cost.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def url_problem(value: str, what: str = "folder") -> str | None:
    """Why `value` cannot name a local `what` (folder, file), or None when it can. The URL is
    shown without its `user:password@` part nor its query, which may hold credentials."""
    if not _URL.match(value):
        return None
    parts = urlsplit(value)
    shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
    return (
        f"{shown!r} is a URL; object storage is not supported yet (issue 27), give a local {what}"
    )
