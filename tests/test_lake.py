"""The lake's own promise: writers on several processes (and machines) never wait for or lose
each other, nothing half-written is ever read, and it reads back what the DuckDB file holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rageval_pipeline.core.history.summaries import select_runs
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.storage.lake import Lake, live_files, schemas
from tests.moto_s3 import moto_server
from tests.test_results import QRELS, QUERIES, RUN
from tests.test_storage import _results, _run_row
from tests.test_warehouse_kinds import KINDS, _count

REPO = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_writer_killed_before_its_commit_leaves_nothing_visible(tmp_path):
    lake = open_warehouse(tmp_path, kind="lake")
    lake.record_run(_run_row("kept"), _results("kept", 0.5))
    # Killed at the worst moment: every Parquet file written, the commit file not yet.
    killed = _python(f"""
        import os, signal
        from rageval_pipeline.core.storage.choose import open_warehouse
        from rageval_pipeline.core.storage.lake import Lake
        from tests.test_storage import _results, _run_row
        Lake._put = lambda self, path, data: os.kill(os.getpid(), signal.SIGKILL)
        open_warehouse({str(tmp_path)!r}, kind="lake").record_run(
            _run_row("lost"), _results("lost", 0.9)
        )
    """)
    assert killed.wait(120) == -signal.SIGKILL, killed.stderr.read()
    orphans = list((tmp_path / "lake" / "runs").rglob("run_id=lost/*.parquet"))
    assert len(orphans) == 1  # written, but named by no commit
    assert lake.query("SELECT run_id FROM runs")["run_id"].tolist() == ["kept"]
    assert lake.query("SELECT DISTINCT run_id FROM query_metrics")["run_id"].tolist() == ["kept"]


WRITER = """
    import sys
    from datetime import UTC, datetime, timedelta
    from rageval_pipeline.core.results.store import measure_run
    from rageval_pipeline.core.storage.choose import open_warehouse
    from tests.test_results import QRELS, QUERIES, RUN

    from rageval_pipeline.core.storage import lake as lake_module

    lake_module.COMPACT_AT = 8  # compactions too, racing each other and the other's commits
    storage, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lake = open_warehouse(storage, kind="lake", owner=name)
    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    print("ready", flush=True)
    sys.stdin.readline()  # both start writing at the same moment
    for i in range(n):
        run_id = f"{name}-{i:03d}"
        keys = dict(run_id=run_id, dataset="mini", split="test", system=name)
        lake.record_run(
            dict(keys, fingerprint="f", level="document", k=10, n_queries=3,
                 dagster_run_id=name, created_at=datetime(2026, 1, 1, tzinfo=UTC)
                 + timedelta(minutes=i), config="{}"),
            {
                "run_metrics": results.means.assign(**keys, created_at=datetime.now(UTC)),
                "query_metrics": results.per_query.assign(**keys),
                "group_metrics": results.groups.assign(**keys),
                "latency": results.latency.assign(**keys),
            },
        )
        lake.finish(runs=run_id)
"""


def test_two_processes_write_at_once_without_a_lock_and_every_row_is_read(tmp_path):
    """Each commit is one new file with a unique name, written last: writers never overwrite
    each other's files or commits. (Named by a clock alone, in 0.1 s ticks, commits of one tick
    replace each other's commit and data files, and this test fails on the runs.)"""
    n = 30
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WRITER), str(tmp_path), name, str(n)],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    assert [w.wait(300) for w in writers] == [0, 0]

    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    lake = open_warehouse(tmp_path, kind="lake", existing=True)
    runs = lake.query("SELECT run_id, finished FROM runs ORDER BY run_id")
    expected = sorted(f"{name}-{i:03d}" for name in ("alpha", "beta") for i in range(n))
    assert runs["run_id"].tolist() == expected and runs["finished"].all()
    for table, frame, key in (
        ("query_metrics", results.per_query, "query_id, measure"),
        ("run_metrics", results.means, "measure"),
        ("latency", results.latency, 'attribute, "group", stat'),
    ):
        total = _count(lake, f"SELECT * FROM {table}")
        distinct = _count(lake, f"SELECT DISTINCT run_id, {key} FROM {table}")
        assert total == distinct == 2 * n * len(frame)  # every row, none twice
    assert len(select_runs(lake)) == 2  # the latest of each system
    commits = lake.commits()
    assert sum("replaces" in c and bool(c["replaces"]) for c in commits) > 2
    assert all(len(files) < 2 * n for files in live_files(commits).values())


def _everything(lake: Lake) -> dict[str, list[tuple]]:
    return {t: _comparable(lake, t) for t in [*schemas(), "history"]}


def test_a_compaction_reads_the_same_and_one_that_lost_a_race_is_skipped(tmp_path):
    lake = open_warehouse(tmp_path, kind="lake")
    for i in range(3):
        lake.record_run(_run_row(f"r{i}"), _results(f"r{i}", i / 10))
    lake.record_run(_run_row("r0"), _results("r0", 0.9))  # replaced: the old rows stay hidden
    lake.record_gate(dict(gate_id="g1", passed=True))
    lake.finish(gate_results="g1")  # (folds nothing yet: below COMPACT_AT)
    before, snapshot = _everything(lake), lake.commits()
    assert len(live_files(snapshot)["query_metrics"]) == 4
    lake.compact(at=2)
    assert {t: len(f) for t, f in live_files(lake.commits()).items()} == dict.fromkeys(
        ["runs", "run_metrics", "query_metrics", "gate_results"], 1
    )
    assert _everything(lake) == before
    # Another writer folded the same files at the same moment: its commit comes second and is
    # skipped; read naively, its copies would count every row twice.
    lake.compact(at=2, commits=snapshot)
    assert len(lake.commits()) == len(snapshot) + 2
    assert _everything(lake) == before


# Differ between two runs of one job whatever holds them: times, ids, measured latencies.
VOLATILE = {
    "created_at",
    "date",
    "run_id",
    "dagster_run_id",
    "gate_id",
    "report_json",
    "summary",
    "reason",
    "machine",
}


def _comparable(warehouse: BaseWarehouse, table: str) -> list[tuple]:
    frame = warehouse.query(f"SELECT * FROM {table}")
    frame = frame.drop(columns=[c for c in frame.columns if c in VOLATILE])
    if table == "latency":
        frame = frame.drop(columns="value")
    rows = frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None)
    return sorted(rows, key=repr)


@pytest.mark.slow
def test_a_job_writes_the_same_tables_to_the_lake_as_to_duckdb(tmp_path, monkeypatch):
    from rageval_pipeline.defs.definitions import build_definitions
    from tests.conftest import make_pipeline_home
    from tests.test_dagster_layer import _materialize

    tables = {}
    for kind in KINDS:
        for name, value in make_pipeline_home(tmp_path / kind).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("RAGEVAL_WAREHOUSE", kind)
        _materialize(build_definitions())  # evaluate_bm25 on beir-mini, gate included
        warehouse = open_warehouse(tmp_path / kind / "storage", existing=True)
        tables[kind] = {t: _comparable(warehouse, t) for t in [*schemas(), "history"]}
    assert not (tmp_path / "lake" / "storage" / "rageval.duckdb").exists()
    for table, rows in tables["duckdb"].items():
        assert tables["lake"][table] == rows, table
    assert len(tables["lake"]["query_metrics"]) > 0 and len(tables["lake"]["experiments"]) == 1


def test_rageval_to_lake_copies_the_duckdb_history_fact_for_fact(tmp_path):
    duckdb_file = open_warehouse(tmp_path, kind="duckdb")
    duckdb_file.record_run(_run_row("r1") | {"finished": False}, _results("r1", 0.1))
    duckdb_file.finish(runs="r1")
    duckdb_file.record_run(_run_row("r2") | {"finished": False}, _results("r2", 0.2))  # killed
    duckdb_file.record_run(_run_row("r3"), {})  # no result rows at all
    assert duckdb_file.record_reuse("r1", "dagster-2", datetime(2026, 1, 2, tzinfo=UTC))
    duckdb_file.record_gate(dict(gate_id="g1", passed=False, created_at=datetime(2026, 1, 3)))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "rageval"), "to-lake", "--storage", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"copied 3 run(s) into {tmp_path / 'lake'}\n"
    lake = open_warehouse(tmp_path, kind="lake", existing=True)
    assert len(lake.commits()) == 1  # all at once, or nothing
    tables = [*schemas(), "history"]
    for table in tables:
        frames = [w.query(f"SELECT * FROM {table}") for w in (duckdb_file, lake)]
        rows = [
            sorted(f.astype(object).where(f.notna(), None).values.tolist(), key=repr)
            for f in frames
        ]
        assert rows[0] == rows[1], table
    assert lake.query("SELECT run_id FROM runs WHERE NOT finished")["run_id"].tolist() == ["r2"]


def test_a_lake_on_read_only_storage_is_read_and_a_write_is_refused_in_one_line(tmp_path):
    from rageval_pipeline.core.storage.files import READ_ONLY
    from tests.test_storage_faults import _run

    open_warehouse(tmp_path, kind="lake").record_run(_run_row("r1"), _results("r1", 0.5))
    done = _run(
        f"""
        from rageval_pipeline.core.storage.choose import open_warehouse
        from rageval_pipeline.core.storage.warehouse import StorageError
        from tests.test_storage import _results, _run_row
        lake = open_warehouse({str(tmp_path)!r}, kind="lake", existing=True)
        print(lake.query("SELECT run_id FROM history")["run_id"].tolist())
        try:
            lake.record_run(_run_row("r2"), _results("r2", 0.5))
        except StorageError as exc:
            print(exc)
        """,
        read_only=tmp_path,
    )
    assert (done.stdout, done.stderr) == (f"['r1']\n{tmp_path / 'lake'}: {READ_ONLY}\n", "")


@pytest.fixture
def s3():
    """A bucket on a local S3-compatible server (moto's), and s3fs filesystems on it."""
    import s3fs

    with moto_server() as aws:

        def connect() -> s3fs.S3FileSystem:
            # Each call: a filesystem of its own, as on another machine (listings cached apart).
            return s3fs.S3FileSystem(
                endpoint_url=aws["AWS_ENDPOINT_URL"],
                key=aws["AWS_ACCESS_KEY_ID"],
                secret=aws["AWS_SECRET_ACCESS_KEY"],
                skip_instance_cache=True,
            )

        connect().mkdir("evals")
        yield connect


def test_a_lake_on_s3_keeps_the_contract_and_compacts(s3):
    from rageval_pipeline.core.storage.choose import lake_at

    writer, reader = lake_at(s3(), "evals/team/lake"), lake_at(s3(), "evals/team/lake")
    writer.record_run(_run_row("r9"), {})
    assert reader.query("SELECT run_id FROM runs")["run_id"].tolist() == ["r9"]
    for i in range(3):
        writer.record_run(_run_row(f"r{i}") | {"finished": False}, _results(f"r{i}", i / 10))
        writer.finish(runs=f"r{i}")
    writer.record_run(_run_row("r0"), _results("r0", 0.9))
    before = _everything(reader)  # a fresh listing: the new commits are seen
    assert sorted(v for *_, v in before["history"]) == [0.1, 0.2, 0.9]  # r9: no metrics
    writer.compact(at=2)
    assert len(live_files(reader.commits())["query_metrics"]) == 1
    assert _everything(reader) == before
    assert reader.location == "s3://evals/team/lake"
