"""Writes cut short (a killed process, a failed step): what they leave is never used later.

- A temp file or folder of a killed atomic write is removed by the next write to its folder; a
  write still in progress keeps its own.
- An evaluation whose step stopped after the DuckDB commit stays `finished = false`: it is not
  judged, reused, listed in history or picked as the latest.
- A writer kept waiting for the warehouse lock names the holder and gives up after
  RAGEVAL_WAREHOUSE_WRITE_WAIT_S with one line; a killed holder never keeps the lock.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.history.summaries import select_runs
from rageval_pipeline.core.results.store import measure_run, store_results
from rageval_pipeline.core.storage.files import write_parquet
from rageval_pipeline.core.storage.locks import ORPHAN_AGE_S
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE, StorageError, Warehouse
from tests.test_results import QRELS, QUERIES, RECORD, RUN

REPO = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _age(path: Path) -> None:
    """Make an entry look as old as a leftover of a write killed a while ago."""
    old = (datetime.now() - timedelta(seconds=2 * ORPHAN_AGE_S)).timestamp()
    os.utime(path, (old, old))


def test_temp_entries_of_killed_writes_go_at_the_next_write_and_live_ones_stay(tmp_path):
    folder = tmp_path / "tables"
    killed = _python(f"""
        import os, signal
        from pathlib import Path
        from rageval_pipeline.core.storage.files import atomic_dir, atomic_path
        with atomic_path(Path("{folder}") / "a.parquet") as tmp, \\
                atomic_dir(Path("{folder}") / "index") as scratch:
            tmp.write_bytes(b"half a file")
            (scratch / "ids.json").write_text("[")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert killed.wait(60) == -signal.SIGKILL
    live = _python(f"""
        import time
        from pathlib import Path
        from rageval_pipeline.core.storage.files import atomic_path
        with atomic_path(Path("{folder}") / "b.parquet") as tmp:
            print(tmp.name, flush=True)
            time.sleep(120)
    """)
    try:
        in_progress = live.stdout.readline().strip()
        # The killed writer's leftovers went at the next write to the folder, young as they
        # were: their names say their writer, whose pid is gone.
        assert sorted(p.name for p in folder.iterdir()) == [in_progress]
        for path in folder.iterdir():
            _age(path)

        write_parquet(pd.DataFrame({"x": [1]}), folder / "c.parquet")

        assert sorted(p.name for p in folder.iterdir()) == sorted(["c.parquet", in_progress])
    finally:
        live.kill()
        live.wait()


def test_a_recent_unlocked_temp_file_is_kept(tmp_path):
    # One just made by mkstemp, not yet locked by its writer, must not go.
    (tmp_path / ".d.parquet.abc.tmp").write_bytes(b"")
    write_parquet(pd.DataFrame({"x": [1]}), tmp_path / "e.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".d.parquet.abc.tmp", "e.parquet"]


def test_an_evaluation_stopped_after_its_commit_is_never_judged_or_reused(tmp_path):
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    complete = store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    # The next evaluation's step fails after the DuckDB commit: its Parquet mirror cannot be
    # written (a file stands where a folder should be), as when the process is killed there.
    blocked = tmp_path / "tables" / "run_metrics" / "dataset=mini" / "system=bm25"
    for path in sorted(blocked.iterdir()):
        path.unlink()
    blocked.rmdir()
    blocked.write_text("not a folder")
    later = RECORD.model_copy(
        update=dict(created_at=RECORD.created_at + timedelta(days=1), dagster_run_id="dagster-2")
    )
    with pytest.raises(OSError):
        store_results(tmp_path, warehouse, later, results, QUERIES)

    stored = warehouse.query("SELECT run_id, finished FROM runs ORDER BY run_id")
    assert stored.values.tolist() == [[complete.run_id, True], [later.run_id, False]]
    assert select_runs(warehouse)["run_id"].tolist() == [complete.run_id]  # the latest
    assert select_runs(warehouse, dagster_run_id="dagster-2").empty
    assert select_runs(warehouse, run_id=later.run_id).empty
    history = warehouse.query("SELECT DISTINCT run_id FROM history")
    assert history["run_id"].tolist() == [complete.run_id]
    now = datetime.now(UTC)
    assert not warehouse.record_reuse(later.run_id, "dagster-3", now)
    assert warehouse.record_reuse(complete.run_id, "dagster-3", now)


def test_a_waiting_writer_names_the_holder_and_gives_up_after_the_wait(
    tmp_path, monkeypatch, caplog
):
    path = tmp_path / WAREHOUSE_FILE
    holder = _python(f"""
        import time
        from pathlib import Path
        from rageval_pipeline.core.storage.warehouse import Warehouse
        with Warehouse(Path("{path}"), owner="dagster run r-123").connect():
            print("held", flush=True)
            time.sleep(120)
    """)
    try:
        assert holder.stdout.readline() == "held\n"
        line = path.with_suffix(".lock").read_text().strip()
        assert line.startswith(f"pid {holder.pid} on ") and " (dagster run r-123) since " in line
        monkeypatch.setenv("RAGEVAL_WAREHOUSE_WRITE_WAIT_S", "1")
        caplog.set_level(logging.WARNING, logger="rageval_pipeline")
        with pytest.raises(StorageError) as refused:
            Warehouse(path).finish(runs="r")
        assert str(refused.value) == (
            f"{path}: busy: waited 1 s for the write lock held by {line}; if that process is "
            "stuck, stop it and run again (RAGEVAL_WAREHOUSE_WRITE_WAIT_S)"
        )
        assert caplog.messages == [
            f"{path.with_suffix('.lock')}: waiting 0 s so far (gives up after 1 s) for the "
            f"write lock held by {line}"
        ]
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        Warehouse(path).finish(runs="r")  # the kernel dropped the dead holder's lock
    finally:
        holder.kill()
        holder.wait()


# A tiny tmpfs in a private mount namespace of the child process: a real full disk.
_TINY_DISK = 'mount -t tmpfs -o size=256k tmpfs "$1" && shift && exec "$@"'


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_a_full_disk_is_one_line_and_keeps_the_previous_file(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    code = f"""
        import os
        import pandas as pd
        from pathlib import Path
        from rageval_pipeline.core.storage.warehouse import StorageError
        from rageval_pipeline.core.storage.files import write_parquet
        path = Path("{disk}") / "tables" / "x.parquet"
        write_parquet(pd.DataFrame({{"x": [1]}}), path)
        try:
            write_parquet(pd.DataFrame({{"x": [os.urandom(64).hex() for _ in range(8000)]}}), path)
        except StorageError as exc:
            print(exc)
        print(sorted(os.listdir(path.parent)), len(pd.read_parquet(path)))
    """
    done = subprocess.run(
        [
            *("unshare", "--mount", "--", "sh", "-c", _TINY_DISK, "sh", str(disk)),
            *(sys.executable, "-c", textwrap.dedent(code)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == (
        f"{disk}/tables: no space left on the device; nothing half-written was kept: free space "
        '(docs/deploy.md, "Full disk") and run again\n'
        "['x.parquet'] 1\n"
    )
