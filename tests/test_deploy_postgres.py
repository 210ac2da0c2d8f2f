"""Dagster on PostgreSQL (deploy/dagster-postgres.yaml) against a real server: two
`dagster job execute` processes evaluate two bundled suites at once with the multiprocess
executor (techdocs' steps spawned as the shipped multiprocess.yaml does, beir-mini's forked from
a server that imported the code once: tests/jobs.forked_steps); warehouse writers take turns
through the `duckdb_write` pool, both gates are recorded, and the UI's GraphQL endpoint shows
the history.

The server comes from the DAGSTER_PG_* variables (`.ci/run` starts one on 127.0.0.1)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.dagster_ui import graphql, running_webserver
from tests.jobs import DEBUG, forked_steps, job_command

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
PG_VARS = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_DB")
SUITES = ("techdocs", "beir-mini")
MULTIPROCESS = REPO / "deploy" / "run_config" / "multiprocess.yaml"
WRITE_EVENTS = ("ExecutionStepStartEvent", "ExecutionStepSuccessEvent")


@pytest.fixture
def postgres_env() -> Iterator[dict[str, str]]:
    """A fresh database on the server named by DAGSTER_PG_*, dropped afterwards."""
    missing = [v for v in PG_VARS if not os.environ.get(v)]
    if missing:
        pytest.skip(f"no PostgreSQL server: {', '.join(missing)} unset (.ci/run starts one)")
    psycopg2 = pytest.importorskip("psycopg2", reason="dagster-postgres (`deploy` extra) missing")
    server = dict(
        host=os.environ["DAGSTER_PG_HOST"],
        port=int(os.environ["DAGSTER_PG_PORT"]),
        user=os.environ["DAGSTER_PG_USER"],
        password=os.environ.get("DAGSTER_PG_PASSWORD", ""),
        dbname=os.environ["DAGSTER_PG_DB"],
        connect_timeout=5,
    )
    try:
        admin = psycopg2.connect(**server)
    except psycopg2.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {server['host']}:{server['port']} unreachable: {exc}")
    admin.autocommit = True
    name = f"rageval_test_{uuid.uuid4().hex[:12]}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    try:
        yield {"DAGSTER_PG_DB": name, "DAGSTER_PG_PASSWORD": server["password"]}
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def start_job(partition: str, env: dict, cwd: Path, executor: Path) -> subprocess.Popen:
    return subprocess.Popen(
        job_command("evaluate_dataset", partition, executor, DEBUG),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


RUNS = """{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }"""
GATE = """{ assetOrError(assetKey: {path: ["gate"]}) { ... on Asset {
  assetMaterializations { runId } } }
  assetCheckExecutions(assetKey: {path: ["gate"]}, checkName: "verdict_passes", limit: 10) {
    runId status } }"""
POOLS = "{ instance { concurrencyLimits { concurrencyKey slotCount } } }"
STEPS = """query Steps($runId: ID!) { logsForRun(runId: $runId) {
  ... on EventConnection { events { __typename ... on MessageEvent { stepKey timestamp } } } } }"""


def pool_intervals(url: str, run_id: str) -> list[tuple[float, float, str]]:
    """(start, end, step) of the run's warehouse-writing steps, from its event log."""
    events = graphql(url, STEPS, {"runId": run_id})["logsForRun"]["events"]
    spans: dict[str, list[float]] = {}
    for event in events:
        step = event.get("stepKey") or ""
        writes = step == "gate" or step.endswith("__metrics")
        if writes and event["__typename"] in WRITE_EVENTS:
            spans.setdefault(step, []).append(float(event["timestamp"]))
    return [(min(t), max(t), f"{run_id[:8]}:{s}") for s, t in spans.items()]


def test_two_suites_at_once_on_postgres_with_multiprocess_steps(pipeline_home, postgres_env):
    home = pipeline_home / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster-postgres.yaml", home / "dagster.yaml")
    env = {**os.environ, **postgres_env, "DAGSTER_HOME": str(home)}
    # The startup step of docs/deploy.md: the pool's row exists before two runs claim it.
    setup = [sys.executable, "-m", "rageval_pipeline.defs.instance_setup"]
    subprocess.run(setup, env={**env, "PYTHONPATH": str(REPO)}, check=True, timeout=300)

    executors = {"techdocs": MULTIPROCESS, "beir-mini": forked_steps(home / "forked.yaml", 3)}
    procs = {suite: start_job(suite, env, pipeline_home, executors[suite]) for suite in SUITES}
    outputs = {suite: proc.communicate(timeout=900)[0] for suite, proc in procs.items()}
    for suite, proc in procs.items():
        assert proc.returncode == 0, f"{suite}:\n{outputs[suite][-4000:]}"
        assert "IO Error: Could not set lock" not in outputs[suite]
        assert "RUN_SUCCESS" in outputs[suite]

    warehouse = pipeline_home / "storage" / "rageval.duckdb"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        gates = con.execute("SELECT dagster_run_id, passed FROM gate_results").fetchall()
        evaluated = con.execute("SELECT dataset, dagster_run_id FROM runs").fetchall()
    assert sorted(d for d, _ in evaluated) == sorted(SUITES)
    run_ids = {d: r for d, r in evaluated}
    assert {r for r, _ in gates} == set(run_ids.values()) and all(p for _, p in gates)

    with running_webserver(env, pipeline_home, pipeline_home / "webserver.log") as url:
        runs = graphql(url, RUNS)["runsOrError"]["results"]
        by_id = {r["runId"]: r for r in runs}
        for suite, run_id in run_ids.items():
            assert by_id[run_id]["status"] == "SUCCESS"
            assert {"key": "dagster/partition", "value": suite} in by_id[run_id]["tags"]
        gate = graphql(url, GATE)
        materialized = gate["assetOrError"]["assetMaterializations"]
        assert {m["runId"] for m in materialized} == set(run_ids.values())
        checks = {c["runId"]: c["status"] for c in gate["assetCheckExecutions"]}
        assert checks == dict.fromkeys(run_ids.values(), "SUCCEEDED")
        limits = graphql(url, POOLS)["instance"]["concurrencyLimits"]
        assert {"concurrencyKey": "duckdb_write", "slotCount": 1} in limits
        # One `duckdb_write` slot: no two warehouse writers of either run overlapped in time.
        spans = sorted(s for run_id in run_ids.values() for s in pool_intervals(url, run_id))
    assert len(spans) == 4, spans
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        assert end <= start, f"{first} and {second} wrote the warehouse at the same time"
