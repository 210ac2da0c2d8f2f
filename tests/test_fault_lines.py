"""Operational faults end in one line naming the real cause and the fix, and writes are ordered
so that a kill or a full disk leaves nothing half-written that a reader would count:

- a full disk during a DuckDB write (a real tmpfs, in a private mount namespace): the full-disk
  line, not DuckDB's `TransactionContext Error: cannot rollback` with the cause 40 lines down;
- a full disk while the gate writes its reports: no half `<ts>/` folder, `latest/` untouched;
- a step process killed in the multiprocess executor: its failure names the signal and the fix,
  not `ChildProcessCrashException` with a trace;
- an object store that stopped answering (moto, stopped): a step checking its input says so,
  not "materialize queries for this partition first"; the steps' IO manager says so too;
- a metrics step killed after some of its Parquet mirror files: a rebuild counts none of them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import s3fs

from rageval_pipeline.core.results import store
from rageval_pipeline.core.results.store import measure_run, mirrored, store_results
from rageval_pipeline.core.storage.files import NO_SPACE, write_parquet
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE, Warehouse
from rageval_pipeline.defs.executors import executor_from_env
from rageval_pipeline.defs.failures import expected
from rageval_pipeline.defs.resources import StepsIOManager, _existing
from tests.moto_s3 import moto_server
from tests.test_storage_interrupted import _TINY_DISK

REPO = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)


def _on_tiny_disk(disk: Path, code: str) -> subprocess.CompletedProcess:
    """Run `code` with a 256 kB tmpfs mounted at `disk` (a real full disk)."""
    return subprocess.run(
        [
            *("unshare", "--mount", "--", "sh", "-c", _TINY_DISK, "sh", str(disk)),
            *(sys.executable, "-c", textwrap.dedent(code)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@needs_root
def test_a_full_disk_in_a_duckdb_write_is_the_full_disk_line(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    done = _on_tiny_disk(
        disk,
        f"""
        from pathlib import Path
        from rageval_pipeline.core.storage.warehouse import StorageError, Warehouse
        from tests.test_storage import _results, _run_row
        warehouse = Warehouse(Path("{disk}") / "rageval.duckdb")
        try:
            for i in range(10_000):
                results = _results(f"r{{i}}", 0.5)
                results["query_metrics"] = results["query_metrics"].sample(
                    2000, replace=True, random_state=i
                ).assign(query_id=[f"q{{i}}-{{n}}-" + "x" * 200 for n in range(2000)])
                warehouse.record_run(_run_row(f"r{{i}}"), results)
        except StorageError as exc:
            print(exc)
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == f"{disk}: {NO_SPACE}\n"
    assert "TransactionContext" not in done.stderr


@needs_root
def test_a_full_disk_while_writing_reports_leaves_no_half_folder(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    done = _on_tiny_disk(
        disk,
        f"""
        import os
        from pathlib import Path
        from rageval_pipeline.core.report import write_reports
        from rageval_pipeline.core.storage.warehouse import StorageError
        from tests.test_report import verdict_for
        reports = Path("{disk}") / "reports" / "d"
        verdict = verdict_for("bm25", 0.2810)
        write_reports(verdict, reports / "20260101T000000Z", reports / "latest")
        (Path("{disk}") / "filler").write_bytes(b"x" * (os.statvfs("{disk}").f_bavail - 2) * 4096)
        try:
            write_reports(verdict, reports / "20260102T000000Z", reports / "latest")
        except StorageError as exc:
            print(exc)
        print(sorted(os.listdir(reports)), sorted(os.listdir(reports / "latest")))
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line, folders = done.stdout.splitlines()
    assert line.endswith(f": {NO_SPACE}") and line.startswith(f"{disk}/reports/d")
    # No `20260102T000000Z/` holding only some files; `latest/` is the previous report, whole.
    kept = ["gate.html", "gate.json", "gate.md", "manifest.json", "report.json"]
    assert folders == f"{['20260101T000000Z', 'latest']} {kept}"


@dg.op
def killed_from_outside() -> None:
    """A step whose process the OOM killer (or a person) ends."""
    os.kill(os.getpid(), signal.SIGKILL)


@dg.job(executor_def=executor_from_env())
def crashing():
    killed_from_outside()


def test_a_killed_step_process_fails_its_step_in_one_line_naming_the_signal(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        run_config = {"execution": {"config": {"multiprocess": {}}}}
        with dg.execute_job(
            dg.reconstructable(crashing), instance, run_config=run_config
        ) as result:
            assert not result.success
            [failure] = result.get_step_failure_events()
            [run_failure] = instance.get_records_for_run(
                result.run_id, of_type=dg.DagsterEventType.RUN_FAILURE
            ).records
    error = failure.step_failure_data.error
    # The run's failure is the same line, not DagsterSubprocessError with the crash's trace.
    ended = run_failure.event_log_entry.dagster_event.event_specific_data.error
    assert (ended.message, ended.stack) == (error.message, [])
    assert error.cls_name == "Failure" and error.stack == []
    assert error.message == (
        "dagster._core.definitions.events.Failure: the process of step killed_from_outside was "
        "terminated by signal 9 (SIGKILL): killed from outside (kill, the out-of-memory killer: "
        "see `dmesg` or the pod's events) or crashed; give it more memory (fewer steps at once: "
        "multiprocess max_concurrent) or run again\n"
    )


def test_a_stopped_object_store_is_its_own_line_not_a_missing_input(monkeypatch):
    monkeypatch.setenv("RAGEVAL_S3_ATTEMPTS", "1")
    monkeypatch.setenv("RAGEVAL_S3_CONNECT_TIMEOUT_S", "1")
    with moto_server() as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("RAGEVAL_STORAGE", "s3://bucket/eval")
        s3fs.S3FileSystem.clear_instance_cache()
        from rageval_pipeline.core.io import paths

        storage = paths.storage_dir()
        storage.fs.mkdir("bucket")
        table = storage / "assets" / "queries" / "techdocs.parquet"
        table.write_bytes(b"PAR1")
        assert _existing(table, "queries") == table
        with pytest.raises(Exception, match="materialize queries for this partition first"):
            _existing(storage / "assets" / "queries" / "other.parquet", "queries")
    s3fs.S3FileSystem.clear_instance_cache()  # a new client, as a new step process has
    storage = paths.storage_dir()
    table = storage / "assets" / "queries" / "techdocs.parquet"
    with pytest.raises(Exception) as err:
        _existing(table, "queries")
    line = str(expected(err.value))
    assert "no answer from the object store (EndpointConnectionError) in 1 try" in line
    assert "materialize" not in line and "\n" not in line
    # What steps pass each other (steps/): the same line, not botocore's trace.
    steps = StepsIOManager(base_dir=str(storage / "steps"))
    io = steps.create_io_manager(dg.build_init_resource_context())
    with pytest.raises(dg.Failure) as failed:
        io.handle_output(dg.build_output_context(step_key="embed", name="shard", run_id="r"), 1)
    assert str(failed.value) == line


def test_a_metrics_step_killed_mid_mirror_leaves_no_rows_a_rebuild_counts(tmp_path, monkeypatch):
    from tests.test_results import QRELS, QUERIES, RECORD, RUN

    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    done = store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    written = []

    def killed_after_three(df, path):  # the step dies writing its fourth mirror file
        if len(written) == 3:
            raise KeyboardInterrupt("killed")
        written.append(path)
        write_parquet(df, path)

    later = RECORD.model_copy(update={"created_at": pd.Timestamp("2030-01-01", tz="UTC")})
    monkeypatch.setattr(store, "write_parquet", killed_after_three)
    with pytest.raises(KeyboardInterrupt):
        store_results(tmp_path, warehouse, later, results, QUERIES)
    assert len(written) == 3 and all(later.run_id in str(p) for p in written)
    for table in ("query_metrics", "run_metrics", "latency"):
        assert set(mirrored(tmp_path, table)["run_id"]) == {done.run_id}, table
    unfinished = warehouse.query("SELECT run_id FROM runs WHERE NOT finished")["run_id"]
    assert unfinished.tolist() == [later.run_id]  # the warehouse agrees: not finished


def test_a_gate_killed_before_its_row_has_written_no_report(evaluated_home, monkeypatch):
    """The verdict's `gate_results` row comes before any report (docs/deploy.md): killed as
    it records the row, the gate leaves `reports/<dataset>/` exactly as it was."""
    from rageval_pipeline.core.storage.base import BaseWarehouse
    from rageval_pipeline.defs.definitions import build_definitions

    defs = build_definitions()
    reports = next(evaluated_home.rglob("beir-mini/latest")).parent
    before = {p.relative_to(reports): p.read_bytes() for p in reports.rglob("*") if p.is_file()}

    def killed(self, row):
        raise KeyboardInterrupt("killed as it records its verdict")

    monkeypatch.setattr(BaseWarehouse, "record_gate", killed)
    with pytest.raises(KeyboardInterrupt):
        dg.materialize(
            [a for a in defs.assets if dg.AssetKey("gate") in a.keys],
            partition_key="beir-mini",
            resources=defs.resources,
        )
    after = {p.relative_to(reports): p.read_bytes() for p in reports.rglob("*") if p.is_file()}
    assert after == before
