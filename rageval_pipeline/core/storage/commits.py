"""A lake commit file (`_commits/<commit>.json`) as readers trust it: a typed record whose file
paths are checked to stay under the lake's root, never joined blindly.

A commit file is written by the lake's own writers, but read from a shared folder or bucket
anyone with write access may touch: a commit cut in half (a copy tool, a full disk), edited by
hand, or naming `run_metrics/../../outside.parquet` must be refused with one line naming the
commit, not followed (a file outside the lake read as warehouse data) nor left to a
JSONDecodeError. A path is `<table>/[<column>=<value>/...]<name>.parquet`: relative, with no
empty, `.` or `..` segment and no backslash, under a folder named after its table.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from rageval_pipeline.core.storage.location import StorageError

# What to do about a commit that cannot be used: the lake CLI (docs/deploy.md, "Lake upkeep").
_NAMING = threading.Lock()
_last_ns = 0
REPAIR = "drop it with `rageval lake repair` (see `rageval lake check`)"


class LakeError(StorageError):
    """A commit of the lake, or a file it names, that cannot be read: names both."""

    def __init__(self, commit: str, problem: str, *, file: str | None = None) -> None:
        self.commit = commit
        self.file = file
        self.reason = f"{problem} ({file})" if file else problem
        super().__init__(commit, f"{self.reason}: {REPAIR}")


class CommitRecord(BaseModel):
    """One commit: the files it added per table, the rows it hides, what it finishes, and the
    files a compaction replaced."""

    model_config = ConfigDict(extra="forbid")

    commit: str
    owner: str = ""
    files: dict[str, list[str]]
    deletes: list[tuple[str, str, str | None]] = []
    finished: list[tuple[str, str]] = []
    replaces: dict[str, list[str]] = {}

    @field_validator("files", "replaces")
    @classmethod
    def _inside(cls, value: dict[str, list[str]], info: ValidationInfo) -> dict[str, list[str]]:
        tables = (info.context or {}).get("tables")
        for table, paths in value.items():
            if tables is not None and table not in tables:
                raise ValueError(f"unknown table {table!r}")
            for path in paths:
                if problem := path_problem(table, path):
                    raise ValueError(f"{path!r} {problem}")
        return value


def path_problem(table: str, path: str) -> str | None:
    """Why `path` is not a file of `table` under the lake's root, or None."""
    parts = path.split("/")
    if "\\" in path or any(p in ("", ".", "..") for p in parts):
        return "leaves the lake's folder (an absolute path, or an empty, . or .. segment)"
    if parts[0] != table or len(parts) < 2 or not path.endswith(".parquet"):
        return f"is not a Parquet file under {table}/"
    return None


def parse_commit(path: str, data: bytes, tables: set[str]) -> dict[str, Any]:
    """The commit stored at `path` (`.../_commits/<name>.json`) as a plain dict; a LakeError
    naming it when it is not whole, not a commit, or names a file outside the lake."""
    name = path.rsplit("/", 1)[-1].removesuffix(".json")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise LakeError(path, "not whole JSON (cut short or overwritten)") from None
    try:
        record = CommitRecord.model_validate(doc, context={"tables": tables})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "commit"
        problem = first["msg"].removeprefix("Value error, ")
        raise LakeError(path, f"{field}: {problem}") from None
    if record.commit != name:
        raise LakeError(path, f"names itself {record.commit!r}, not its file's name")
    return record.model_dump()


def live_files(commits: list[dict]) -> dict[str, list[str]]:
    """Each table's files to read: those the commits added, less those a compaction replaced.
    A compaction counts only when every file it replaces is still live at its turn (commit
    order); one that lost a race is skipped whole, its rows read from the files it copied."""
    live: dict[str, dict[str, None]] = {}
    for commit in commits:
        replaces = commit.get("replaces", {})
        if any(f not in live.get(t, {}) for t, files in replaces.items() for f in files):
            continue
        for table, files in replaces.items():
            for f in files:
                del live[table][f]
        for table, files in commit["files"].items():
            live.setdefault(table, {}).update(dict.fromkeys(files))
    return {table: list(files) for table, files in live.items()}


def commit_name() -> str:
    """A name no other writer picks (uuid4), sorting after this process's earlier commits."""
    global _last_ns
    with _NAMING:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        return f"{_last_ns:020d}-{uuid.uuid4().hex}"
