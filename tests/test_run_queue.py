"""Run-queue faults (defs/run_workers.py, defs/heartbeat.py, defs/waiting.py), with real run
workers in real processes on a real SQLite instance:

- a run killed in its first moment (after RUN_START, before its first heartbeat) holds a place
  in the run queue: `slots` lists it, and the sensor `free_dead_runs`, `slots` and the next
  run each fail it within the heartbeat's staleness bound (it was left to `max_runtime` (4 h));
- a run waiting for a pool slot says at INFO what it waits for and since when, and frees a
  dead holder itself once its heartbeat is stale, without the daemon;
- a worker with this host's name in another PID namespace (`unshare --pid`, as a pod with
  host networking) is judged by its heartbeat, never by a pid that means another process
  here: its live run is never failed.

The staleness is set small (3 s, beats every 0.5 s)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from rageval_pipeline.defs.executors import executor_from_env
from rageval_pipeline.defs.resources import WRITE_POOL, Settings
from rageval_pipeline.defs.run_workers import WORKER_TAG, free_dead_runs, reap
from tests.test_run_heartbeat import _eventually

REPO = Path(__file__).resolve().parents[1]
BEAT_S, STALE_S = 0.5, 3.0
WORKER = """
import os, signal, sys
import dagster as dg
from rageval_pipeline.defs import heartbeat
if sys.argv[1] == "before-first-beat":  # killed between RUN_START and the executor's first beat
    heartbeat._beat = lambda instance, run_id: os.kill(os.getpid(), signal.SIGKILL)
from tests import test_run_queue
with dg.DagsterInstance.get() as instance:
    dg.execute_job(dg.reconstructable(getattr(test_run_queue, sys.argv[2])), instance)
"""


@dg.op(pool=WRITE_POOL)
def hold(settings: Settings) -> None:
    """A long step holding the write slot."""
    time.sleep(600)


@dg.op(pool=WRITE_POOL)
def write(settings: Settings) -> None:
    """A short step that needs the write slot."""


@dg.job(executor_def=executor_from_env(), resource_defs={"settings": Settings()})
def held():
    hold()


@dg.job(executor_def=executor_from_env(), resource_defs={"settings": Settings()})
def next_run():
    write()


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    timing = {"RAGEVAL_HEARTBEAT_S": str(BEAT_S), "RAGEVAL_HEARTBEAT_STALE_S": str(STALE_S)}
    for name, value in {**timing, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.set_concurrency_slots(WRITE_POOL, 1)
    return home


def _worker(mode: str, job: str, prefix: list[str] = ()) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [*prefix, sys.executable, "-c", WORKER, mode, job]
    return subprocess.Popen(command, env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)


def _started(instance: dg.DagsterInstance) -> list[str]:
    runs = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    return [run.run_id for run in runs]


def _failed_at(instance: dg.DagsterInstance, run_id: str) -> float:
    [record] = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
    return record.event_log_entry.timestamp


def _slots(home: Path, **env_vars: str) -> list[str]:
    """`python -m rageval_pipeline.defs.slots`'s lines."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home), **env_vars}
    shown = subprocess.run(
        [sys.executable, "-m", "rageval_pipeline.defs.slots"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.splitlines()


def _reap_by(reaper: str, instance: dg.DagsterInstance, home: Path) -> list[str]:
    if reaper == "sensor":
        result = free_dead_runs(dg.build_sensor_context(instance=instance))
        return [] if result.skip_message.endswith("none") else [result.skip_message]
    if reaper == "slots":
        return [line for line in _slots(home) if "marked failed" in line]
    with dg.execute_job(dg.reconstructable(next_run), instance) as result:  # reaps as it sets up
        assert result.success
    return []  # (the caller checks the dead run)


@pytest.mark.parametrize("reaper", ["sensor", "slots", "next run"])
def test_a_run_killed_before_its_first_heartbeat_is_failed_within_the_staleness(
    home, reaper, capsys
):
    with dg.DagsterInstance.get() as instance:
        killed = _worker("before-first-beat", "held")
        assert killed.wait(120) == -signal.SIGKILL, killed.stderr.read()
        gone = time.time()
        [run_id] = _started(instance)
        [start] = instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.RUN_START
        ).records
        started = start.event_log_entry.timestamp
        assert WORKER_TAG not in instance.get_run_by_id(run_id).tags  # no step ever set up
        # Listed while it holds the run queue's place (by a `slots` that waits longer for a
        # heartbeat: its own start-up outlasts this test's staleness), never failed before.
        listed = [line for line in _slots(home, RAGEVAL_HEARTBEAT_STALE_S="600") if run_id in line]
        assert len(listed) == 1 and listed[0].startswith(f"run queue: run {run_id} (STARTED, ")
        assert "no heartbeat yet" in listed[0]
        if time.time() - started < STALE_S:
            assert reap(instance) == []
        _eventually(lambda: time.time() - started > STALE_S, "time stood still")
        _reap_by(reaper, instance, home)
        run = instance.get_run_by_id(run_id)
        failed = _failed_at(instance, run_id)
        messages = [e.message or "" for e in instance.all_logs(run_id)]
    assert run.status == dg.DagsterRunStatus.FAILURE
    assert _started(instance) == []
    [why] = [m for m in messages if "never a heartbeat" in m]
    assert why.startswith("its run worker (started ") and f"over {STALE_S:g} s" in why
    # The timeline, for the record (printed with -s): well within the staleness plus a reaper's
    # own start-up (this machine is shared and slow).
    print(
        f"\n[{reaper}] RUN_START t=0; killed (exit seen) t={gone - started:.1f} s; listed by "
        f"slots; failed t={failed - started:.1f} s (staleness {STALE_S:g} s)"
    )
    assert STALE_S < failed - started < STALE_S + 60


def test_a_waiting_run_says_what_it_waits_for_and_frees_a_dead_holder(home):
    with dg.DagsterInstance.get() as instance:
        holder = _worker("alive", "held", ["unshare", "--pid", "--fork", "--kill-child=SIGKILL"])
        try:
            [held_by] = _eventually(
                lambda: [
                    s.run_id
                    for s in instance.event_log_storage.get_concurrency_info(
                        WRITE_POOL
                    ).claimed_slots
                ],
                "the holder never took the slot",
            )
            waiter = _worker("alive", "next_run")
            waiting = _eventually(
                lambda: [
                    m
                    for run in _started(instance)
                    if run != held_by
                    for e in instance.all_logs(run)
                    if "waiting since" in (m := e.message or "")
                ],
                "the waiting run said nothing",
            )
            holder.kill()  # unshare's child goes with it (--kill-child)
            assert waiter.wait(120) == 0, waiter.stderr.read()
        finally:
            holder.kill()
            holder.wait()
        assert instance.get_run_by_id(held_by).status == dg.DagsterRunStatus.FAILURE
    line = waiting[0]
    print(f"\nthe waiting run's INFO line: {line}")
    assert line.startswith("step write waiting since ") and " UTC (" in line
    assert f"for a slot of pool {WRITE_POOL}, held by: {WRITE_POOL}: run {held_by} step hold" in (
        line
    )
    assert "run queue" not in line  # the slot's holders only, not the waiting run itself


def test_a_live_run_on_a_host_of_the_same_name_is_never_failed(home):
    """The worker keeps this host's name but runs in its own PID namespace: its pid (1 there)
    means another process here, so only its heartbeat may judge it."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a PID namespace")
    with dg.DagsterInstance.get() as instance:
        worker = _worker("alive", "held", ["unshare", "--pid", "--fork", "--kill-child=SIGKILL"])
        try:
            [run_id] = _eventually(lambda: _started(instance), "the run never started")
            _eventually(
                lambda: WORKER_TAG in instance.get_run_by_id(run_id).tags, "no worker recorded"
            )
            recorded = instance.get_run_by_id(run_id).tags[WORKER_TAG]
            beaten = time.time()
            while time.time() - beaten < 2 * STALE_S:  # alive past the staleness: never failed
                assert reap(instance) == [] and "marked failed" not in "".join(_slots(home)[:1])
                time.sleep(0.5)
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
            worker.kill()
            assert _eventually(lambda: reap(instance), "the dead run was never failed") == [run_id]
        finally:
            worker.kill()
            worker.wait()
    host, pid = recorded.split(":")[:2]
    assert host == os.uname().nodename and pid == "1"  # its own namespace's pid 1
