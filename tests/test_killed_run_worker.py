"""A run worker killed (`kill -9`) inside `<system>/metrics`, holding the `duckdb_write` slot, on
a local instance with no daemon running (issue 36): its step process stops by itself, and the
next run started on the machine fails the dead run and frees its slot as its first steps set
up (defs/run_workers.py), then finishes. Without that, the next run waited for the slot for up
to `max_runtime_seconds` (4 h), and only with the daemon running.

The victim is held inside `bm25/metrics` deterministically: this test holds the warehouse's
write lock, which the step waits for (naming this test) while holding its pool slot."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from rageval_pipeline.core.storage.locks import space
from rageval_pipeline.defs.resources import WRITE_POOL
from rageval_pipeline.defs.run_workers import WORKER_TAG, free, free_dead_runs, holders, started
from tests.test_deploy_interrupted import WAITING, Job, kill_all, warehouse_lock_held

REPO = Path(__file__).resolve().parents[1]
RUN_CONFIG = REPO / "deploy" / "run_config"


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _eventually(condition, what: str, within_s: float = 60) -> None:
    """Wait for `condition` (a generous bound, not a timing assertion)."""
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


@pytest.fixture
def instance_env(pipeline_home) -> dict:
    """A local (SQLite) DAGSTER_HOME with the shipped dagster.yaml and its pool turned on."""
    home = pipeline_home / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    setup = subprocess.run(
        [sys.executable, "-m", "rageval_pipeline.defs.instance_setup"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert setup.stdout.splitlines()[-1] == f"pool {WRITE_POOL}: 1 slot", setup.stderr
    return env


@pytest.mark.slow
def test_a_killed_run_worker_stops_its_steps_and_the_next_run_frees_its_slot(
    pipeline_home, instance_env
):
    home = Path(instance_env["DAGSTER_HOME"])
    jobs: list[Job] = []
    try:
        with warehouse_lock_held(pipeline_home / "storage"):
            victim = Job("beir-mini", instance_env, pipeline_home, RUN_CONFIG / "multiprocess.yaml")
            jobs.append(victim)
            victim.wait_for(WAITING)  # a step process inside bm25/metrics, holding the slot
            steps = _children(victim.proc.pid)
            assert steps
            os.kill(victim.proc.pid, signal.SIGKILL)
            assert victim.finish(30) == -signal.SIGKILL
            # The step process saw its run worker go and stopped; it wrote nothing more.
            _eventually(lambda: not any(map(_alive, steps)), f"step processes {steps} live on")
        with dg.DagsterInstance.from_config(str(home)) as instance:
            [dead] = instance.get_runs()
            assert dead.status == dg.DagsterRunStatus.STARTED  # nothing told Dagster yet
            assert dead.tags[WORKER_TAG].split(":")[1] == str(victim.proc.pid)
            claimed = instance.event_log_storage.get_concurrency_info(WRITE_POOL).claimed_slots
            assert [c.run_id for c in claimed] == [dead.run_id]
        # The next run, with no daemon and no person: its first step fails the dead run and
        # frees the slot, so its own bm25/metrics gets it.
        following = Job("beir-mini", instance_env, pipeline_home)
        jobs.append(following)
        assert following.finish(timeout=600) == 0, following.output[-4000:]
        assert "RUN_SUCCESS" in following.output
    finally:
        kill_all(jobs)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        dead = instance.get_run_by_id(dead.run_id)
        messages = [e.message for e in instance.all_logs(dead.run_id)]
        after = instance.event_log_storage.get_concurrency_info(WRITE_POOL)
    assert dead.status == dg.DagsterRunStatus.FAILURE
    assert any("its run worker (pid" in (m or "") for m in messages), messages[-5:]
    assert after.claimed_slots == []


def test_the_daemons_sensor_fails_only_runs_whose_worker_here_is_gone():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    here = space()
    workers = {
        "gone": f"{host}:{gone.pid}:{started(os.getpid())}:{here}",  # the pid's process ended
        "alive": f"{host}:{os.getpid()}:{started(os.getpid())}:{here}",
        "reused": f"{host}:{os.getpid()}:1:{here}",  # this pid, but another process's start time
        "elsewhere": f"another-host:{gone.pid}:1:{here}",  # not ours to judge by pid
        # This host's name, another machine or PID namespace: its pid means nothing here.
        "same-name": f"{host}:{gone.pid}:1:{'f' * 12}",
    }
    with dg.instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots(WRITE_POOL, len(workers))
        runs = {}
        for name, worker in workers.items():
            run = instance.add_run(
                dg.DagsterRun(
                    job_name="evaluate_bm25",
                    run_id=f"run-{name}",
                    status=dg.DagsterRunStatus.STARTED,
                    tags={WORKER_TAG: worker},
                )
            )
            instance.event_log_storage.claim_concurrency_slot(WRITE_POOL, run.run_id, "m")
            runs[name] = run.run_id
        skip = free_dead_runs(dg.build_sensor_context(instance=instance))
        status = {n: instance.get_run_by_id(r).status for n, r in runs.items()}
        claimed = instance.event_log_storage.get_concurrency_info(WRITE_POOL).claimed_slots
        shown = sorted(holders(instance, WRITE_POOL))
        free(instance, "run-alive")  # by hand (python -m rageval_pipeline.defs.slots --free)
        freed = instance.get_run_by_id("run-alive").status
        left = instance.event_log_storage.get_concurrency_info(WRITE_POOL).claimed_slots
    assert shown == [
        f"{WRITE_POOL}: run run-alive step m (STARTED, {workers['alive']})",
        f"{WRITE_POOL}: run run-elsewhere step m (STARTED, {workers['elsewhere']})",
        f"{WRITE_POOL}: run run-same-name step m (STARTED, {workers['same-name']})",
    ]
    assert freed == dg.DagsterRunStatus.FAILURE
    assert sorted(c.run_id for c in left) == ["run-elsewhere", "run-same-name"]
    reaped = skip.skip_message.removeprefix("failed 2 dead run(s): ").split(", ")
    assert sorted(reaped) == ["run-gone", "run-reused"]
    assert status == {
        "gone": dg.DagsterRunStatus.FAILURE,
        "alive": dg.DagsterRunStatus.STARTED,
        "reused": dg.DagsterRunStatus.FAILURE,
        "elsewhere": dg.DagsterRunStatus.STARTED,
        "same-name": dg.DagsterRunStatus.STARTED,
    }
    assert sorted(c.run_id for c in claimed) == ["run-alive", "run-elsewhere", "run-same-name"]
