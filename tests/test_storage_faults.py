"""Storage faults: read-only storage, a held write lock, a corrupted DuckDB file, a truncated
index. Each class is checked over several instances, with the exact one-line message."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.history.summaries import select_runs
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.dense import DenseIndex
from rageval_pipeline.core.storage.files import atomic_dir
from rageval_pipeline.core.storage.location import MANIFEST
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE, StorageError, Warehouse
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus

REPO = Path(__file__).parent.parent
READ_ONLY = "storage is read-only here: point RAGEVAL_STORAGE at a writable folder"
REBUILD = "rebuild the index (materialize its <system>/index asset with force: true)"
FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"


def _record(warehouse: Warehouse, system: str, value: float) -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    run_id = f"r-{system}"
    keys = dict(run_id=run_id, dataset="d", split="test", system=system)
    warehouse.record_run(
        dict(
            **keys,
            fingerprint="f" * 16,
            level="document",
            k=10,
            n_queries=1,
            created_at=created,
            config="{}",
            finished=True,
        ),
        {
            "run_metrics": pd.DataFrame(dict(measure=["nDCG@10"], value=[value])).assign(
                **keys, created_at=created
            )
        },
    )


@pytest.fixture
def storage(tmp_path) -> Path:
    """A storage folder with one recorded run."""
    folder = tmp_path / "storage"
    _record(Warehouse(folder / WAREHOUSE_FILE), "bm25", 0.5)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


# Root ignores permission bits: as root, the folder is also bind-mounted read-only in a
# private mount namespace of the child process (EROFS), as on a read-only volume.
_RO_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'


def _run(code: str, read_only: Path | None = None) -> subprocess.CompletedProcess:
    """Python code in a fresh process; with `read_only`, that folder cannot be written."""
    argv = [sys.executable, "-c", textwrap.dedent(code)]
    if read_only is not None:
        for path in [*read_only.rglob("*"), read_only]:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        if os.geteuid() == 0:
            if shutil.which("unshare") is None:
                pytest.skip("running as root without unshare: cannot make a folder read-only")
            argv = ["unshare", "--mount", "--", "sh", "-c", _RO_MOUNT, "sh", str(read_only), *argv]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


HISTORY = """
    from rageval_pipeline.cli import main
    raise SystemExit(main(["history", "--dataset", "d", "--storage", "{storage}"]))
"""
READS = {
    "history": HISTORY,
    "query": """
        from pathlib import Path
        from rageval_pipeline.core.storage.warehouse import Warehouse
        print(Warehouse.existing(Path("{storage}")).query("SELECT count(*) AS n FROM runs")["n"][0])
    """,
    "select_runs": """
        from pathlib import Path
        from rageval_pipeline.core.storage.warehouse import Warehouse
        from rageval_pipeline.core.history.summaries import select_runs
        print(select_runs(Warehouse.existing(Path("{storage}")))["system"].tolist())
    """,
}
READ_OUTPUT = {
    "history": "2026-01-01 00:00:00\td\tbm25\tffffffffffffffff\tdocument\tnDCG@10\t0.5000\n",
    "query": "1\n",
    "select_runs": "['bm25']\n",
}


@pytest.mark.parametrize("read", sorted(READS))
def test_reads_work_on_read_only_storage(storage, read):
    done = _run(READS[read].format(storage=storage), read_only=storage)
    assert (done.returncode, done.stdout, done.stderr) == (0, READ_OUTPUT[read], "")


@pytest.mark.parametrize("read", sorted(READS))
def test_reads_do_not_wait_for_the_write_lock(storage, read):
    # Another process holds the warehouse's write lock for as long as this test runs.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys,time; f=open(sys.argv[1],'w'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)",
            str(storage / "rageval.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with open(storage / "rageval.lock", "w") as probe, pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = _run(READS[read].format(storage=storage))
        assert (done.returncode, done.stdout, done.stderr) == (0, READ_OUTPUT[read], "")
    finally:
        holder.kill()
        holder.wait()


WRITES = {
    "warehouse": (
        "",
        """
        from tests.test_storage_faults import _record
        from rageval_pipeline.core.storage.warehouse import Warehouse
        _record(Warehouse(Path("{storage}") / "rageval.duckdb"), "dense", 0.4)
    """,
    ),
    "parquet mirror": (
        "tables/run_metrics/dataset=d",
        """
        import pandas as pd
        from rageval_pipeline.core.storage.files import write_parquet
        path = Path("{storage}/tables/run_metrics/dataset=d/x.parquet")
        write_parquet(pd.DataFrame(dict(a=[1])), path)
    """,
    ),
    "report": (
        "reports/latest",
        """
        from rageval_pipeline.core.storage.files import write_text
        write_text(Path("{storage}/reports/latest/gate.md"), "x")
    """,
    ),
    "index": (
        "indexes/bm25",
        """
        from rageval_pipeline.core.storage.files import atomic_dir
        with atomic_dir(Path("{storage}/indexes/bm25/d")) as tmp:
            (tmp / "a").write_text("x")
    """,
    ),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_writes_to_read_only_storage_fail_naming_the_folder(storage, write):
    sub, code = WRITES[write]
    before = (storage / WAREHOUSE_FILE).read_bytes()
    done = _run(
        "from pathlib import Path\n"
        "from rageval_pipeline.core.storage.warehouse import StorageError\n"
        "try:\n"
        + textwrap.indent(textwrap.dedent(code.format(storage=storage)), "    ")
        + "except StorageError as exc:\n    print(exc)\n    raise SystemExit(2)\n",
        read_only=storage,
    )
    folder = storage / sub if sub else storage
    assert (done.returncode, done.stdout, done.stderr) == (2, f"{folder}: {READ_ONLY}\n", "")
    assert (storage / WAREHOUSE_FILE).read_bytes() == before


def test_the_cli_reports_a_read_only_warehouse_write_in_one_line(storage):
    # `rageval history` only reads; the warehouse's own write path is the one to refuse.
    done = _run(
        "from pathlib import Path\nfrom tests.test_storage_faults import _record\n"
        "from rageval_pipeline.core.storage.warehouse import Warehouse\n"
        f"_record(Warehouse(Path('{storage}') / 'rageval.duckdb'), 'x', 0.1)\n",
        read_only=storage,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"rageval_pipeline.core.storage.location.StorageError: {storage}: {READ_ONLY}"
    )
    assert "During handling" not in done.stderr  # no chained OSError


CORRUPTIONS = {
    "text": lambda good: b"not a database\n" * 100,
    "zeros": lambda good: bytes(16384),
    "empty": lambda good: b"",
    "first block only": lambda good: good[:4096],
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
@pytest.mark.parametrize("access", ["read", "write", "history"])
def test_a_corrupted_warehouse_names_the_recovery_and_is_left_as_it_was(
    storage, corruption, access, capsys
):
    path = storage / WAREHOUSE_FILE
    broken = CORRUPTIONS[corruption](path.read_bytes())
    path.write_bytes(broken)
    message = (
        f"{path}: not a readable DuckDB database; nothing was changed. Move it aside "
        f"(mv {path} {path}.broken) and re-run the evaluations to start a new one; the "
        "Parquet mirror under tables/ keeps every past run's tables"
    )
    if access == "history":
        from rageval_pipeline.cli import main

        assert main(["history", "--dataset", "d", "--storage", str(storage)]) == 2
        assert capsys.readouterr().err == f"error: {message}\n"
    else:
        with pytest.raises(StorageError) as err:
            if access == "read":
                Warehouse(path).query("SELECT * FROM runs")
            else:
                _record(Warehouse(path), "dense", 0.4)
        assert str(err.value) == message
        assert err.value.__cause__ is None and err.value.__suppress_context__ is False
    assert path.read_bytes() == broken


def _chunks() -> pd.DataFrame:
    corpus = pd.read_json(FIXTURES / "corpus.jsonl", lines=True, dtype=str)
    return chunk_corpus(corpus.assign(url="", metadata="{}"), ChunkingConfig(), "t")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("indexes")
    BM25Index.build(_chunks()).save(root / "bm25")
    DenseIndex.build(_chunks(), root / "emb").save(root / "dense")
    return {"bm25": root / "bm25", "dense": root / "dense"}


LOADERS = {"bm25": BM25Index.load, "dense": DenseIndex.load}
TRUNCATED = [
    ("bm25", "ids.json"),
    ("bm25", "params.index.json"),
    ("bm25", "data.csc.index.npy"),
    ("dense", "embeddings.npy"),
    ("dense", "meta.json"),
]


@pytest.mark.parametrize(("kind", "name"), TRUNCATED)
def test_a_truncated_index_file_is_named_and_asks_for_a_rebuild(indexes, tmp_path, kind, name):
    directory = tmp_path / kind
    shutil.copytree(indexes[kind], directory)
    file = directory / name
    size = file.stat().st_size
    file.write_bytes(file.read_bytes()[: size // 2])
    with pytest.raises(StorageError) as err:
        LOADERS[kind](directory)
    assert str(err.value) == (
        f"{file}: truncated or altered ({size // 2} of {size} bytes): {REBUILD}"
    )


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_an_index_without_its_manifest_or_a_file_asks_for_a_rebuild(indexes, tmp_path, kind):
    directory = tmp_path / kind
    shutil.copytree(indexes[kind], directory)
    victim = sorted(p for p in directory.iterdir() if p.name != MANIFEST)[0]
    victim.unlink()
    with pytest.raises(StorageError) as err:
        LOADERS[kind](directory)
    assert str(err.value) == f"{victim}: missing: {REBUILD}"
    (directory / MANIFEST).unlink()
    with pytest.raises(StorageError) as err:
        LOADERS[kind](directory)
    assert str(err.value) == f"{directory}: missing or incomplete (no {MANIFEST}): {REBUILD}"


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_index_writes_are_atomic(indexes, tmp_path, kind, monkeypatch):
    """A save that fails midway leaves the previous index whole and no temp folder behind."""
    directory = tmp_path / kind
    shutil.copytree(indexes[kind], directory)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    index = LOADERS[kind](directory)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    target = "bm25s.BM25.save" if kind == "bm25" else "numpy.save"
    monkeypatch.setattr(target, fail)
    with pytest.raises(OSError, match="disk full"):
        index.save(directory)
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [kind]


def test_atomic_dir_replaces_the_whole_folder(tmp_path):
    target = tmp_path / "idx"
    with atomic_dir(target) as tmp:
        (tmp / "old-only").write_text("1")
    with atomic_dir(target) as tmp:
        (tmp / "new").write_text("22")
    assert sorted(p.name for p in target.iterdir()) == [MANIFEST, "new"]
    assert (target / MANIFEST).read_text() == '{"new": 2}'


_WRITER = (
    "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('open', flush=True); "
    "time.sleep(float(sys.argv[2]))"
)


def _hold_open(path: Path, seconds: float) -> subprocess.Popen:
    """Another process with a read-write DuckDB connection on `path` (a write in progress)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout.readline() == "open\n"
    return writer


IN_PROCESS_READS = {
    "query": lambda storage: Warehouse(storage / WAREHOUSE_FILE).query("SELECT 1"),
    "existing": lambda storage: Warehouse.existing(storage),
    "select_runs": lambda storage: select_runs(Warehouse(storage / WAREHOUSE_FILE)),
}


@pytest.mark.parametrize("read", sorted(IN_PROCESS_READS))
def test_a_read_waits_for_a_write_in_progress(storage, read):
    writer = _hold_open(storage / WAREHOUSE_FILE, 1.0)
    try:
        IN_PROCESS_READS[read](storage)  # would raise a lock error if it did not wait
        assert writer.wait(timeout=30) == 0
    finally:
        writer.kill()


@pytest.mark.parametrize("read", sorted(IN_PROCESS_READS))
def test_a_read_gives_up_on_a_long_write_in_one_line(storage, read, monkeypatch):
    monkeypatch.setenv("RAGEVAL_WAREHOUSE_READ_WAIT_S", "0.5")
    writer = _hold_open(storage / WAREHOUSE_FILE, 60)
    try:
        with pytest.raises(StorageError) as err:
            IN_PROCESS_READS[read](storage)
    finally:
        writer.kill()
        writer.wait()
    assert str(err.value) == (
        f"{storage / WAREHOUSE_FILE}: busy: another process has been writing it for over 0.5 s; "
        "try again when it is done (RAGEVAL_WAREHOUSE_READ_WAIT_S)"
    )
