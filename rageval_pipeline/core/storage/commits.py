"""A lake commit file (`_commits/<commit>.json`) as readers trust it: a typed record whose file
paths are checked to stay under the lake's root, never joined blindly, ordered by a sequence
number its writer claimed, never by a name's time.

A commit file is written by the lake's own writers, but read from a shared folder or bucket
anyone with write access may touch: a commit cut in half (a copy tool, a full disk), edited by
hand, or naming `run_metrics/../../outside.parquet` must be refused with one line naming the
commit, not followed (a file outside the lake read as warehouse data) nor left to a
JSONDecodeError. A path is `<table>/[<column>=<value>/...]<name>.parquet`: relative, with no
empty, `.` or `..` segment and no backslash, under a folder named after its table.

Order. Readers apply commits in name order, and a later commit's delete hides a run's earlier
rows, so whatever sorts last wins. Names were once `<time in ns>-<uuid>`: a writer whose clock
ran ahead, or a hand-made commit, sorted after everything and could hide a run for good. A
writer now claims the next number of a sequence first, by creating `_commits/s<n>.claim`
exclusively (O_EXCL locally, a conditional PUT `If-None-Match: *` on S3): one writer gets each
number, and its commit is `s<n>-<uuid>.json`. A reader refuses a sequence commit whose number
was not claimed for it, and a time-named one dated in the future or after the lake's first
claim (hand-made, or copied from another lake): `rageval lake check` lists them, reads stop at
them. An unfinished claim (a claim with no commit yet) also tells `gc` when the oldest writer
still writing began.

Every file here is read bounded: a regular file (never a link, FIFO or device) of at most
`MAX_COMMIT_BYTES`, whose JSON numbers have at most `MAX_DIGITS` digits; nesting too deep for
the JSON reader is refused as not a commit.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from rageval_pipeline.core.storage.location import StorageError, is_local, protocols

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

# What to do about a commit that cannot be used: the lake CLI (docs/deploy.md, "Lake upkeep").
REPAIR = "drop it with `rageval lake repair` (see `rageval lake check`)"
MAX_COMMIT_BYTES = 64 * 2**20  # a compaction of 64 files of every table names ~1,500 paths: ~200 kB
MAX_DIGITS = 40  # a commit's numbers are small; Python refuses over 4,300 digits with a trace
SEQUENCE = re.compile(r"s(\d{20})-[0-9a-f]{32}")
TIMED = re.compile(r"(\d{20})-[0-9a-f]{32}")  # the names of lakes written before the sequence
CLAIM = ".claim"
CLOCK_SKEW_S = 300.0  # a time-named commit dated further ahead than this is refused
WRITER_LIFE_S = 6 * 3600.0  # a claim without its commit after this is a killed writer's
# Commit and claim files never change: each is read once per process, (protocol, path) -> its
# commit (a dict) or its claim's bytes.
_DOCS: dict[tuple[str, str], Any] = {}
_NAMING = threading.Lock()


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


class _Unreadable(Exception):
    """Why a file of `_commits/` was not read (one phrase)."""


def _number(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        digits = f"{len(text)} digits (a commit's have at most {MAX_DIGITS})"
        raise _Unreadable(f"holds a number of {digits}")
    return int(text)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data, parse_int=_number)
    except _Unreadable:
        raise
    except RecursionError:
        raise _Unreadable("nested deeper than a JSON reader follows (not a commit)") from None
    except (UnicodeDecodeError, ValueError):
        raise _Unreadable("not whole JSON (cut short or overwritten)") from None


def parse_commit(path: str, data: bytes, tables: set[str]) -> dict[str, Any]:
    """The commit stored at `path` (`.../_commits/<name>.json`) as a plain dict; a LakeError
    naming it when it is not whole, not a commit, or names a file outside the lake."""
    name = path.rsplit("/", 1)[-1].removesuffix(".json")
    try:
        doc = _json(data)
    except _Unreadable as exc:
        raise LakeError(path, str(exc)) from None
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


def load_log(
    fs: AbstractFileSystem, folder: str, shown: Callable[[str], str], tables: set[str]
) -> dict[str, dict | LakeError]:
    """The commits of the `_commits/` folder `folder`, in commit order, by their paths as
    `shown` to people: each its commit, or the LakeError saying why it cannot be used."""
    entries = listing(fs, folder, shown(folder))
    claims = Claims(entries)
    protocol = protocols(fs)[0]
    paths = sorted(p for p in entries if p.endswith(".json"))
    loaded: dict[str, dict | LakeError] = {}
    new = [p for p in paths if (protocol, p) not in _DOCS]
    numbers = {int(m[1]) for p in new if (m := SEQUENCE.fullmatch(_name(p)))}
    claim_paths = {n: claims.at[n][0] for n in numbers if n in claims.at}
    wanted = [c for c in claim_paths.values() if (protocol, c) not in _DOCS]
    read = read_files(fs, {p: entries[p] for p in [*new, *wanted]})
    for path in wanted:
        if claimed_name(read[path]) is not None:  # a claim still being written: read again
            _DOCS[protocol, path] = read[path]
    claimed = {n: _DOCS.get((protocol, c)) for n, c in claim_paths.items()}
    for path in new:
        data = read[path]
        try:
            if isinstance(data, str):
                raise LakeError(shown(path), data)
            if problem := order_problem(_name(path), claims, claimed):
                raise LakeError(shown(path), problem)
            _DOCS[protocol, path] = parse_commit(shown(path), data, tables)
        except LakeError as exc:
            loaded[path] = exc
    return {shown(p): loaded[p] if p in loaded else _DOCS[protocol, p] for p in paths}


def _name(path: str) -> str:
    """A commit's name, from its file's path."""
    return path.rsplit("/", 1)[-1].removesuffix(".json")


def listing(fs: AbstractFileSystem, folder: str, shown: str) -> dict[str, dict]:
    """`folder`'s entries with their details (none when it does not exist); a StorageError
    naming it (`shown`) when it cannot be listed."""
    fs.invalidate_cache(folder)  # object stores cache listings; commits are new files
    try:
        entries = fs.ls(folder, detail=True)
    except FileNotFoundError:
        return {}
    except OSError as exc:  # PermissionError for an unreadable folder, as the OS says it
        if not is_local(fs):
            raise  # an object store's refusal: its own line (core.storage.faults)
        why = exc.strerror or type(exc).__name__
        raise StorageError(shown, f"cannot be listed ({why}): let this user read it") from None
    return {info["name"]: info for info in entries}


def read_files(fs: AbstractFileSystem, entries: dict[str, dict]) -> dict[str, bytes | str]:
    """Each listed file's bytes, or why it was not read: only regular files (never a link,
    FIFO or device, which could block or never end) of at most MAX_COMMIT_BYTES."""
    out: dict[str, bytes | str] = {}
    if is_local(fs):
        for path in entries:
            try:
                out[path] = _read_local(path)
            except _Unreadable as exc:
                out[path] = str(exc)
        return out
    fetch = []
    for path, info in entries.items():
        if info.get("type", "file") != "file":
            out[path] = "not a file"
        elif (info.get("size") or 0) > MAX_COMMIT_BYTES:
            out[path] = f"{info['size']} bytes, over a commit file's {MAX_COMMIT_BYTES}"
        else:
            fetch.append(path)
    if fetch:
        out |= fs.cat(fetch)  # concurrent GETs on object stores
    return out


def _read_local(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Unreadable("a symbolic link, not a commit file") from None
        raise _Unreadable(f"cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Unreadable("not a regular file (a FIFO, device or socket)")
        if info.st_size > MAX_COMMIT_BYTES:
            raise _Unreadable(f"{info.st_size} bytes, over a commit file's {MAX_COMMIT_BYTES}")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= MAX_COMMIT_BYTES and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_COMMIT_BYTES:
            raise _Unreadable(f"over a commit file's {MAX_COMMIT_BYTES} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise _Unreadable(f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)


def modified(info: dict) -> float | None:
    """A listed file's last change (s since the epoch), local or object store; None when the
    filesystem says nothing."""
    for key in ("mtime", "LastModified", "updated", "last_modified"):
        value = info.get(key)
        if value is not None:
            return value.timestamp() if hasattr(value, "timestamp") else float(value)
    return None


class Claims:
    """The sequence numbers claimed in a `_commits/` listing: number -> (claim path, when)."""

    def __init__(self, entries: dict[str, dict]) -> None:
        self.at: dict[int, tuple[str, float | None]] = {}
        for path, info in entries.items():
            stem = path.rsplit("/", 1)[-1]
            if stem.endswith(CLAIM) and stem[1 : -len(CLAIM)].isdigit() and stem[0] == "s":
                self.at[int(stem[1 : -len(CLAIM)])] = (path, modified(info))

    def first(self) -> float | None:
        """When the lake's first claim was made (None: no claim yet)."""
        times = [t for _, t in self.at.values() if t is not None]
        return min(times) if times else None

    def open_since(self, committed: set[int], now: float) -> float | None:
        """When the oldest writer still writing claimed its number: a claim without its
        commit, younger than WRITER_LIFE_S (older ones are killed writers')."""
        times = [
            t
            for n, (_, t) in self.at.items()
            if n not in committed and t is not None and now - t < WRITER_LIFE_S
        ]
        return min(times) if times else None


def order_problem(name: str, claims: Claims, claimed_for: dict[int, bytes | None]) -> str | None:
    """Why commit `name` may not take its place in the order, or None: a sequence number not
    claimed for it, an unknown name, a time-named commit that does not belong to the past."""
    if match := SEQUENCE.fullmatch(name):
        number = int(match[1])
        if number not in claims.at:
            return f"sequence number {number} was never claimed (a hand-made or copied commit)"
        if claimed_name(claimed_for.get(number)) != name:
            return f"sequence number {number} was claimed by another commit (hand-made or copied)"
        return None
    if match := TIMED.fullmatch(name):
        at = int(match[1]) / 1e9
        if at > time.time() + CLOCK_SKEW_S:
            return (
                f"dated {at - time.time():.0f} s in the future: it would sort after every "
                "commit (a hand-made commit, or a writer whose clock runs ahead)"
            )
        first = claims.first()
        if first is not None and at > first + CLOCK_SKEW_S:
            return "time-named after the lake began to number its commits (hand-made)"
        return None
    return "not a commit's name (s<sequence>-<id>.json): a hand-made or copied file"


def claimed_name(data: bytes | str | None) -> str | None:
    """The commit a claim file's content names, None when it names none (or was not read)."""
    if not isinstance(data, bytes):
        return None
    try:
        doc = _json(data)
    except _Unreadable:
        return None
    return doc.get("commit") if isinstance(doc, dict) else None


def claim_name(fs: AbstractFileSystem, folder: str, owner: str, numbers: set[int]) -> str:
    """Claim the next sequence number after `numbers` (those listed), by creating its claim
    file exclusively; the commit name that goes with it."""
    with _NAMING:
        number = max(numbers, default=0) + 1
        if is_local(fs):
            fs.makedirs(folder, exist_ok=True)
        while True:
            name = f"s{number:020d}-{uuid.uuid4().hex}"
            data = json.dumps({"commit": name, "owner": owner}).encode()
            try:
                _create(fs, f"{folder}/s{number:020d}{CLAIM}", data)
            except FileExistsError:
                number += 1  # another writer took it: the next one
                continue
            return name


def _create(fs: AbstractFileSystem, path: str, data: bytes) -> None:
    """Write a new file whose name nobody has taken, atomically; FileExistsError if taken."""
    if not is_local(fs):
        fs.pipe_file(path, data, mode="create")  # S3: PUT If-None-Match: *
        return
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"  # written whole, then linked: never seen half
    with open(tmp, "wb") as out:
        out.write(data)
    try:
        os.link(tmp, path)  # atomic, and EEXIST when the name is taken
    finally:
        os.unlink(tmp)


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
