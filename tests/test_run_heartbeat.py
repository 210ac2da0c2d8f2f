"""A run worker on another machine, killed (`kill -9`) while it holds the `duckdb_write` slot,
is failed from this machine once its heartbeat is stale, and its slot freed (issue 36;
defs/heartbeat.py). Before, nothing here could judge a worker elsewhere: the run stayed STARTED
with the slot until `max_runtime_seconds` (4 h).

The worker is a real process running a real run through the project's executor; it calls
itself `machine-a`, so this machine cannot judge it by its pid. The staleness is set small."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from rageval_pipeline.defs.executors import executor_from_env
from rageval_pipeline.defs.heartbeat import last_beats
from rageval_pipeline.defs.resources import WRITE_POOL, Settings
from rageval_pipeline.defs.run_workers import WORKER_TAG, holders, reap
from tests.test_deploy_postgres import postgres_env  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[1]
BEAT_S, STALE_S = 0.5, 3.0
WORKER = """
import socket
socket.gethostname = lambda: "machine-a"  # the worker runs "elsewhere"
import dagster as dg
import pytest
import yaml
from tests.test_run_heartbeat import held
with dg.DagsterInstance.get() as instance:
    dg.execute_job(dg.reconstructable(held), instance)
"""


@dg.op(pool=WRITE_POOL)
def hold(settings: Settings) -> None:
    """A long step holding the write slot (its worker is killed during it)."""
    time.sleep(600)


@dg.job(executor_def=executor_from_env(), resource_defs={"settings": Settings()})
def held():
    hold()


def _eventually(condition, what: str, within_s: float = 120):
    """Wait for `condition` to hold and return its value (a generous bound, not a timing)."""
    deadline = time.monotonic() + within_s
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return value


@pytest.fixture(params=["sqlite", "postgres"])
def storage_env(request, tmp_path) -> dict[str, str]:
    """A DAGSTER_HOME on SQLite (one machine), or on PostgreSQL (a deployment's hosts share
    it; the shipped deploy/dagster-postgres.yaml, skipped without a server)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {"DAGSTER_HOME": str(home)}
    if request.param == "postgres":
        env |= request.getfixturevalue("postgres_env")
        config = yaml.safe_load((REPO / "deploy" / "dagster-postgres.yaml").read_text())
        (home / "dagster.yaml").write_text(yaml.safe_dump({"storage": config["storage"]}))
    return env


def test_a_dead_worker_on_another_host_is_failed_once_its_heartbeat_is_stale(
    storage_env, monkeypatch
):
    timing = {"RAGEVAL_HEARTBEAT_S": str(BEAT_S), "RAGEVAL_HEARTBEAT_STALE_S": str(STALE_S)}
    for name, value in {**timing, **storage_env}.items():
        monkeypatch.setenv(name, value)
    home = Path(storage_env["DAGSTER_HOME"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.event_log_storage.set_concurrency_slots(WRITE_POOL, 1)
        worker = subprocess.Popen([sys.executable, "-c", WORKER], env=env, cwd=home)
        try:

            def holding():
                claimed = instance.event_log_storage.get_concurrency_info(WRITE_POOL)
                return [slot.run_id for slot in claimed.claimed_slots]

            [run_id] = _eventually(holding, "the worker's step never took the slot")
            recorded = instance.get_run_by_id(run_id).tags[WORKER_TAG]
            first = last_beats(instance, [run_id])[run_id]
            # Alive and beating through its long step: never reaped, past the staleness too.
            _eventually(
                lambda: last_beats(instance, [run_id])[run_id].at > first.at + STALE_S,
                "the worker stopped beating while alive",
            )
            assert reap(instance) == []
            [shown] = holders(instance, WRITE_POOL)
            os.kill(worker.pid, signal.SIGKILL)
            assert worker.wait(30) == -signal.SIGKILL
            assert _eventually(lambda: reap(instance), "the dead run was never failed") == [run_id]
        finally:
            worker.kill()
            worker.wait()
        run = instance.get_run_by_id(run_id)
        messages = [entry.message or "" for entry in instance.all_logs(run_id)]
        assert holding() == []
    assert recorded.startswith(f"machine-a:{worker.pid}:")
    assert first.host == "machine-a"
    assert shown.startswith(f"{WRITE_POOL}: run {run_id} step hold (STARTED, {recorded}, last ")
    assert shown.endswith(" s ago on machine-a)")
    assert run.status == dg.DagsterRunStatus.FAILURE
    failed = [m for m in messages if "last heartbeat" in m]
    assert len(failed) == 1 and failed[0].startswith("its run worker (on machine-a, last heart")
