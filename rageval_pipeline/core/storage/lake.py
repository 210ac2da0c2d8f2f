"""The lake: the warehouse's tables as immutable Parquet files, which any number of processes on
any number of machines write at the same time without a lock (`RAGEVAL_WAREHOUSE=lake`).

A documented manifest scheme rather than Delta Lake or Iceberg: `deltalake` is not installed
and Iceberg wants a catalog database, the single shared point this replaces. What the
warehouse needs (append-only facts, "a later record of a run replaces it", "finished only
once marked") fits a log of small commit files, needs only what every object store offers
(put, list, get) and no new dependency.

Commit protocol, under the lake's root (any fsspec filesystem: local, s3, gs):
1. A writer names its commit `<time in ns, 20 digits>-<uuid4>`: unique without coordination,
   ordered by time, strictly increasing within a process.
2. It writes its rows as new files `<table>/dataset=<d>/run_id=<id>/<commit>.parquet`, each
   with a `_commit` column; no file is ever overwritten or changed.
3. Last, it writes `_commits/<commit>.json` in one atomic step (an object PUT; locally a temp
   file renamed over): the files it added, the rows it supersedes and what it finishes.
4. Readers list `_commits/` and read only the files the commits name: a writer killed before
   step 3 leaves files nobody reads; a commit is visible whole or not at all.
5. Nothing is updated in place. A row is hidden by a later commit's delete for its run
   (`record_run` replaces a run, `replace_measures` some of its measures); a run or verdict
   is finished when a commit at or after its row's names it in `finished`.

Many small files make reads slow (a file open each), so a writer finishing a run folds each
table's live files into one once there are `COMPACT_AT` of them: a commit whose one new file
holds exactly the rows (and `_commit`s) of the files it `replaces`. Readers apply such a
compaction only if every file it replaces is still live at its turn, in commit order; one that
lost a race with another is skipped whole, and nothing is lost or read twice (`live_files`).

`read()` opens an in-memory DuckDB with one view per table of `core.storage.schema` (same
names, columns and types) over the committed files, as pyarrow datasets on the filesystem that
DuckDB scans lazily, so every SQL reader works unchanged. Experiments are numbered at read time
in commit order, so two gates committing at once never share a number. Reads inside a write
block see what is committed, not the block's own writes.
"""

from __future__ import annotations

import functools
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import quote

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.commits import (
    Claims,
    LakeError,
    claim_name,
    listing,
    live_files,
    load_log,
)
from rageval_pipeline.core.storage.files import writable
from rageval_pipeline.core.storage.location import NO_BUCKET, StorageError, is_local, protocols
from rageval_pipeline.core.storage.schema import (
    APPENDED_TABLES,
    HISTORY_VIEW,
    RESULT_TABLES,
    SCHEMA,
)
from rageval_pipeline.core.storage.warehouse import insert_rows

if TYPE_CHECKING:
    import duckdb
    from fsspec import AbstractFileSystem

COMMITS = "_commits"
COMMIT = "_commit"  # the column naming the commit of every row in the lake's files
# A table with these columns has its files in folders by their values (`dataset=<name>/...`).
PARTITIONS = ("dataset", "run_id")
NULL_SEGMENT = "__HIVE_DEFAULT_PARTITION__"  # pyarrow's hive name for a missing value
# Per thread: lake -> the in-memory connection of its open read block / the commit being built.
_OPEN = threading.local()
FACTS = {
    "_deletes": pa.schema(
        [("tbl", pa.string()), ("run_id", pa.string()), ("measure_like", pa.string())]
    ),
    "_finished": pa.schema([("tbl", pa.string()), ("key", pa.string())]),
}
FINISH_KEYS = {"runs": "run_id", "gate_results": "gate_id"}
COMPACT_AT = 64  # live files of one table that a writer folds into one as it finishes a run
ROW_GROUP = 65_536  # rows per row group of a compacted file: a run_id filter skips the rest


def _held(kind: str) -> dict:
    if not hasattr(_OPEN, kind):
        setattr(_OPEN, kind, {})
    return getattr(_OPEN, kind)


def _staging() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding the warehouse schema: rows staged in it take the tables'
    types and defaults exactly as the DuckDB warehouse gives them."""
    import duckdb

    con = duckdb.connect()
    con.execute(SCHEMA)
    return con


@functools.cache
def schemas() -> dict[str, pa.Schema]:
    """Each table's Arrow schema, from the warehouse schema itself."""
    with _staging() as con:
        names = [n for (n,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {n: con.sql(f'SELECT * FROM "{n}"').to_arrow_table().schema for n in names}


class Commit:
    """One commit being built: its rows (staged in DuckDB) and its facts."""

    def __init__(self) -> None:
        self.con = _staging()
        self.deletes: list[tuple[str, str, str | None]] = []  # table, run_id, measure pattern
        self.finished: list[tuple[str, str]] = []  # table, key
        self.folded: dict[str, tuple[pa.Table, list[str]]] = {}  # table -> rows, files replaced

    def empty(self) -> bool:
        """Nothing to commit: no rows, facts or compaction."""
        if self.deletes or self.finished or self.folded:
            return False
        return not any(
            self.con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchall() for table in schemas()
        )


class Lake(BaseWarehouse):
    """The warehouse as a lake of Parquet files under `root` on the fsspec filesystem `fs`."""

    def __init__(self, fs: AbstractFileSystem, root: str, *, owner: str = "") -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.owner = owner

    @property
    def location(self) -> str:
        """The root as people write it: a folder, or a URL."""
        return self.root if is_local(self.fs) else f"{protocols(self.fs)[0]}://{self.root}"

    def _key(self) -> tuple[int, str]:
        return (id(self.fs), self.root)

    def commits(self) -> list[dict]:
        """Every commit, oldest first; a LakeError naming the first that cannot be used."""
        loaded = self.load_commits()
        if bad := next((c for c in loaded.values() if isinstance(c, LakeError)), None):
            raise bad
        return list(loaded.values())

    def load_commits(self) -> dict[str, dict | LakeError]:
        """Each commit file, in commit order, by its name as shown to people: its commit, or
        the LakeError saying why it cannot be used (`rageval lake check` lists them)."""
        return load_log(self.fs, f"{self.root}/{COMMITS}", self.shown, set(schemas()))

    def shown(self, path: str) -> str:
        """A path under the root as people write it (`s3://bucket/eval/lake/_commits/x.json`)."""
        return f"{self.location}/{path.removeprefix(self.root).lstrip('/')}"

    def damaged(self, commits: list[dict]) -> LakeError | None:
        """The first live file (in commit order) that is missing or no Parquet file, as a
        LakeError naming its commit, else None (reads each footer). Other store failures
        (network, permission, a missing bucket) are no commit's fault: raised as they are."""
        live = {(t, f) for t, files in live_files(commits).items() for f in files}
        bucket = self.root.split("/")[0]
        for commit in commits:
            shown = self.shown(f"{COMMITS}/{commit['commit']}.json")
            for table, files in commit["files"].items():
                for file in (f for f in files if (table, f) in live):
                    try:
                        pq.read_metadata(f"{self.root}/{file}", filesystem=self.fs)
                    except FileNotFoundError:
                        if not is_local(self.fs) and not self.fs.exists(bucket):
                            bucket = f"{protocols(self.fs)[0]}://{bucket}"
                            raise StorageError(bucket, NO_BUCKET) from None
                        return LakeError(shown, "names a missing file", file=file)
                    except pa.ArrowInvalid:
                        unreadable = "names an unreadable Parquet file (ArrowInvalid)"
                        return LakeError(shown, unreadable, file=file)
        return None

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory connection with the tables as views over what is committed now."""
        held = _held("reads")
        if (con := held.get(self._key())) is not None:
            yield con
            return
        commits = self.commits()
        try:
            con = self._views(commits)
            held[self._key()] = con
            try:
                yield con
            finally:
                del held[self._key()]
                con.close()
        except InputError:
            raise
        except Exception:
            # A missing or cut file surfaces as FileNotFoundError, ArrowInvalid or a DuckDB
            # error deep in a scan: name the commit and file instead, when one is to blame.
            if (bad := self.damaged(commits)) is not None:
                raise bad from None
            raise

    def _views(self, commits: list[dict]) -> duckdb.DuckDBPyConnection:
        import duckdb

        con = duckdb.connect()
        for name, schema in FACTS.items():
            full = schema.append(pa.field(COMMIT, pa.string()))
            rows = [(*fact, c["commit"]) for c in commits for fact in c[name[1:]]]
            facts = [dict(zip(full.names, row, strict=True)) for row in rows]
            con.register(name, pa.Table.from_pylist(facts, schema=full))
        live = live_files(commits)
        for table, schema in schemas().items():
            con.register(f"_files_{table}", self._dataset(table, live.get(table, [])))
            con.execute(f'CREATE VIEW "{table}" AS {_view(table, schema.names)}')
        con.execute(HISTORY_VIEW)
        return con

    def _dataset(self, table: str, files: list[str]) -> ds.Dataset:
        """A table's files, scanned lazily; `run_id=<id>` folders let a filter skip files."""
        return ds.dataset(
            [f"{self.root}/{f}" for f in files],
            schema=schemas()[table].append(pa.field(COMMIT, pa.string())),
            format="parquet",
            filesystem=self.fs,
            partitioning="hive",
            partition_base_dir=f"{self.root}/{table}",
        )

    def compact(self, *, at: int, commits: list[dict] | None = None) -> None:
        """Fold each table that has `at` live files or more (as of `commits`, default now)
        into one file, in one commit."""
        live = live_files(self.commits() if commits is None else commits)
        commit = Commit()
        try:
            for table, files in live.items():
                if len(files) >= at:
                    rows = self._dataset(table, files).to_table()
                    if "run_id" in rows.column_names:
                        rows = rows.sort_by("run_id")
                    commit.folded[table] = (rows, files)
            self._commit(commit)
        finally:
            commit.con.close()

    @contextmanager
    def connect(self) -> Iterator[Commit]:
        """A write block: everything written in it becomes one commit when it ends, and
        nothing at all when it fails."""
        held = _held("writes")
        if (pending := held.get(self._key())) is not None:
            yield pending
            return
        commit = held[self._key()] = Commit()
        try:
            yield commit
            self._commit(commit)
        finally:
            del held[self._key()]
            commit.con.close()

    transaction = connect  # every commit is all or nothing

    def _commit(self, commit: Commit) -> None:
        with writable(self.location):  # read-only storage or a full disk: one line
            self._write(commit)

    def _write(self, commit: Commit) -> None:
        if commit.empty():
            return  # no number claimed: an unfinished claim is a writer still writing (gc)
        folder = f"{self.root}/{COMMITS}"
        numbers = set(Claims(listing(self.fs, folder, self.shown(folder))).at)
        name = claim_name(self.fs, folder, self.owner, numbers)
        files: dict[str, list[str]] = {}
        for table, schema in schemas().items():
            rows = commit.con.sql(f'SELECT * FROM "{table}"').to_arrow_table()
            if not rows.num_rows:
                continue
            rows = rows.append_column(COMMIT, pa.array([name] * rows.num_rows, pa.string()))
            keys = [c for c in PARTITIONS if c in schema.names]
            groups = rows.group_by(keys).aggregate([]).to_pylist() if keys else [{}]
            for group in groups:
                part = rows.filter(_equal(group)) if group else rows
                parts = [f"{k}={_segment(v)}" for k, v in group.items()]
                folder = "/".join([table, *parts])
                path = f"{folder}/{name}.parquet"
                if is_local(self.fs):  # on S3 it would create a deleted bucket anew
                    self.fs.makedirs(f"{self.root}/{folder}", exist_ok=True)
                with self.fs.open(f"{self.root}/{path}", "wb") as out:
                    pq.write_table(part, out)
                files.setdefault(table, []).append(path)
        for table, (rows, _) in commit.folded.items():
            path = f"{table}/{name}.parquet"
            with self.fs.open(f"{self.root}/{path}", "wb") as out:
                pq.write_table(rows, out, row_group_size=ROW_GROUP)
            files.setdefault(table, []).append(path)
        doc = dict(
            commit=name,
            owner=self.owner,
            files=files,
            deletes=commit.deletes,
            finished=commit.finished,
            replaces={table: replaced for table, (_, replaced) in commit.folded.items()},
        )
        self._put(f"{self.root}/{COMMITS}/{name}.json", json.dumps(doc, sort_keys=True).encode())

    def _put(self, path: str, data: bytes) -> None:
        """Write a whole file in one atomic step."""
        if not is_local(self.fs):
            self.fs.pipe_file(path, data)  # one PUT: the object appears whole or not at all
            return
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"  # not *.json: never listed as a commit
        self.fs.pipe_file(tmp, data)
        self.fs.mv(tmp, path)  # a rename: atomic on one filesystem

    def record_run(self, run: dict, results: dict[str, pd.DataFrame]) -> None:
        run = {"finished": False} | run
        with self.connect() as commit:
            commit.deletes += [(t, run["run_id"], None) for t in ("runs", *RESULT_TABLES)]
            columns, marks = ", ".join(run), ", ".join("?" * len(run))
            commit.con.execute(f"INSERT INTO runs ({columns}) VALUES ({marks})", list(run.values()))
            for table, df in results.items():
                insert_rows(commit.con, table, df)

    def replace_measures(self, run_id: str, like: str, tables: dict[str, pd.DataFrame]) -> None:
        with self.connect() as commit:
            for table, df in tables.items():
                commit.deletes.append((table, run_id, like))
                insert_rows(commit.con, table, df)

    def append(self, table: str, rows: pd.DataFrame) -> None:
        if table not in APPENDED_TABLES:
            raise ValueError(f"{table!r} is not appended to")
        with self.connect() as commit:
            insert_rows(commit.con, table, rows)

    def finish(self, *, runs: str | None = None, gate_results: str | None = None) -> None:
        with self.connect() as commit:
            for table, key in (("runs", runs), ("gate_results", gate_results)):
                if key is not None:
                    commit.finished.append((table, key))
        self.compact(at=COMPACT_AT)


def _segment(value: object) -> str:
    """A partition folder's value as hive partitioning reads it back (URI-encoded)."""
    return NULL_SEGMENT if value is None else quote(str(value), safe="")


def _equal(group: dict) -> ds.Expression:
    """Rows whose partition columns hold the group's values."""
    return functools.reduce(
        lambda a, b: a & b,
        [ds.field(k).is_null() if v is None else ds.field(k) == v for k, v in group.items()],
    )


def _view(table: str, columns: list[str]) -> str:
    """The SQL of a table's view over its committed rows (`t`), with the facts applied."""
    shown = []
    for column in columns:
        if column == "finished":
            key = FINISH_KEYS[table]
            shown.append(
                f"(t.finished OR EXISTS (SELECT 1 FROM _finished f WHERE f.tbl = '{table}' "
                f"AND f.key = t.{key} AND f.{COMMIT} >= t.{COMMIT})) AS finished"
            )
        elif table == "experiments" and column == "id":
            # core.history.experiments' numbering (`exp-001`), in commit order.
            shown.append(f"printf('exp-%03d', row_number() OVER (ORDER BY t.{COMMIT}, t.id)) AS id")
        else:
            shown.append(f't."{column}"')
    sql = f"SELECT {', '.join(shown)} FROM _files_{table} t"
    if table in ("runs", *RESULT_TABLES):
        measure = "d.measure_like IS NULL"
        if "measure" in columns:
            measure = f"({measure} OR t.measure LIKE d.measure_like)"
        # An ANTI JOIN, not NOT EXISTS: DuckDB then still pushes a reader's `run_id` filter
        # into the scan, which skips the other runs' files unopened (run_id=<id> folders).
        sql += (
            f" ANTI JOIN (SELECT * FROM _deletes WHERE tbl = '{table}') d "
            f"ON d.run_id = t.run_id AND d.{COMMIT} > t.{COMMIT} AND {measure}"
        )
    return sql
