"""Interrupted runs on a Dagster instance on PostgreSQL (the shipped deploy/dagster-postgres.yaml,
with the daemon running): a run SIGKILLed while it holds the `duckdb_write` slot is marked
failed and its slot freed without a manual step, and the run waiting for the slot then
finishes; two runs that both got into the pool never write the warehouse at the same time.

The warehouse's write lock is held by the test while runs reach their writing step, so that
each run is stopped, for as long as the test needs, inside `<system>/metrics` holding its pool
slot (and says so: the lock names its holder). The server comes from the DAGSTER_PG_* variables
(`.ci/run` starts one on 127.0.0.1); the tests skip without one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from rageval_pipeline.core.storage import locks
from rageval_pipeline.defs.resources import WRITE_POOL
from tests.dagster_ui import BIN, stop
from tests.jobs import DEBUG, job_command
from tests.test_deploy_postgres import postgres_env  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
# Test-only: the daemon polls every 2 s and frees a finished run's slots 5 s after it ended
# (shipped: 30 s each), and the killed run is bounded by the run tag `dagster/max_runtime`
# (shipped default: 4 h), so that the whole story fits in the CI budget.
FAST_MONITORING = {"poll_interval_seconds": 2, "free_slots_after_run_end_seconds": 5}
VICTIM_MAX_RUNTIME_S = 45
WAITING = f"for the write lock held by pid {os.getpid()}"  # our lock's line, naming this test


class Job:
    """A `dagster job execute` process of evaluate_bm25 whose output is collected as it comes."""

    def __init__(self, partition: str, env: dict, cwd: Path, *configs: Path, **tags: str) -> None:
        self.proc = subprocess.Popen(
            # The pool's "Step blocked" and RUN_SUCCESS are DEBUG events.
            job_command("evaluate_bm25", partition, DEBUG, *configs, **tags),
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            assert self.proc.poll() is None, f"exited before {text!r}:\n{self.output[-4000:]}"
            assert time.monotonic() < deadline, f"no {text!r}:\n{self.output[-4000:]}"
            time.sleep(0.5)

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self.reader.join(10)
        return code


def kill_all(jobs: list[Job]) -> None:
    """End the jobs this test started that still run (after a failed assertion)."""
    for job in jobs:
        if job.proc.poll() is None:
            job.proc.kill()
            job.proc.wait()


@pytest.fixture
def instance_env(pipeline_home, postgres_env, monkeypatch) -> Iterator[dict]:  # noqa: F811
    """DAGSTER_HOME with the shipped PostgreSQL config (monitoring intervals shortened), its
    pool created at startup by two setup processes at once, as pods starting together do."""
    home = pipeline_home / "dagster_home"
    home.mkdir()
    config = yaml.safe_load((REPO / "deploy" / "dagster-postgres.yaml").read_text())
    config["run_monitoring"] |= FAST_MONITORING
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, **postgres_env, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    setup = [sys.executable, "-m", "rageval_pipeline.defs.instance_setup"]
    procs = [
        subprocess.Popen(
            setup, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    for proc in procs:
        out = proc.communicate(timeout=300)[0]
        assert (proc.returncode, out.splitlines()[-1]) == (0, f"pool {WRITE_POOL}: 1 slot"), out
    for name, value in postgres_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    yield env


def concurrency(home: Path):
    """The `duckdb_write` pool's slots and who holds them."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.event_log_storage.get_concurrency_info(WRITE_POOL)


@contextmanager
def warehouse_lock_held(storage: Path) -> Iterator[None]:
    storage.mkdir(parents=True, exist_ok=True)
    with locks.held(storage / "rageval.lock", owner="the test", wait_s=1):
        yield


def test_a_run_killed_holding_the_pool_slot_is_failed_and_the_next_run_finishes(
    pipeline_home, instance_env
):
    home = Path(instance_env["DAGSTER_HOME"])
    daemon_log = (pipeline_home / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [str(BIN / "dagster-daemon"), "run", "-m", "rageval_pipeline"],
        env=instance_env,
        cwd=pipeline_home,
        stdout=daemon_log,
        stderr=subprocess.STDOUT,
    )
    jobs: list[Job] = []
    try:
        with warehouse_lock_held(pipeline_home / "storage"):
            victim = Job(
                "beir-mini",
                instance_env,
                pipeline_home,
                **{"dagster/max_runtime": str(VICTIM_MAX_RUNTIME_S)},
            )
            jobs.append(victim)
            victim.wait_for(WAITING)  # inside bm25/metrics, holding the one slot
            [claim] = concurrency(home).claimed_slots
            assert claim.step_key == "bm25__metrics" and claim.run_id in victim.output
            following = Job("beir-mini", instance_env, pipeline_home)
            jobs.append(following)
            following.wait_for(f"Step blocked by limit for pool {WRITE_POOL}")
            os.kill(victim.proc.pid, signal.SIGKILL)
            assert victim.finish(30) == -signal.SIGKILL
        # No manual step from here: the daemon fails the dead run, then frees its slot.
        try:
            code = following.finish(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the next run did not finish within 2 minutes:\n{following.output[-4000:]}"
            )
        assert code == 0 and "RUN_SUCCESS" in following.output, following.output[-4000:]
    finally:
        stop(daemon)
        daemon_log.close()
        kill_all(jobs)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        dead = instance.get_run_by_id(claim.run_id)
        messages = [e.message for e in instance.all_logs(claim.run_id)]
    assert dead.status == dg.DagsterRunStatus.FAILURE
    # The default run launcher cannot reach a dead worker: the next run's step finds its worker
    # gone and fails it (defs/run_workers.py), or the daemon cancels it past its max runtime.
    reaped = [m for m in messages if "is gone, killed or crashed: failed by rageval" in m]
    canceled = f"Canceling due to exceeding maximum runtime of {VICTIM_MAX_RUNTIME_S} seconds."
    assert reaped or canceled in messages, messages[-5:]
    after = concurrency(home)
    assert (after.slot_count, after.claimed_slots) == (1, [])
    with duckdb.connect(str(pipeline_home / "storage" / "rageval.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT dagster_run_id, finished FROM runs").fetchall()
        gates = con.execute("SELECT dagster_run_id, finished FROM gate_results").fetchall()
    assert len(rows) == 1 and rows[0][0] != claim.run_id and rows[0][1]
    assert gates == rows


def test_two_runs_in_the_pool_at_once_take_turns_on_the_warehouse_lock(pipeline_home, instance_env):
    # As when the pool let two runs in at once (Dagster's pool is not a strict mutex).
    home = Path(instance_env["DAGSTER_HOME"])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.event_log_storage.set_concurrency_slots(WRITE_POOL, 2)
    jobs: list[Job] = []
    try:
        with warehouse_lock_held(pipeline_home / "storage"):
            jobs += [Job(suite, instance_env, pipeline_home) for suite in ("beir-mini", "techdocs")]
            for job in jobs:
                job.wait_for(WAITING)  # both inside bm25/metrics, both holding a slot
            assert len(concurrency(home).claimed_slots) == 2
        for job in jobs:
            assert job.finish(timeout=300) == 0, job.output[-4000:]
            assert "Could not set lock" not in job.output
    finally:
        kill_all(jobs)
    with duckdb.connect(str(pipeline_home / "storage" / "rageval.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT dataset, finished FROM runs ORDER BY dataset").fetchall()
    assert rows == [("beir-mini", True), ("techdocs", True)]
