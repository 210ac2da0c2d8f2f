"""The sharded dense index on Dagster's parallel executors equals the in-process unsharded
build exactly: with the multiprocess executor (two steps at once), and with a real Celery
worker on a PostgreSQL broker (dagster-celery's executor, the run config of
deploy/run_config/celery.yaml). beir-mini and the packaged MiniLM; the CLI is the real one."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.core.retrieval.base import execute
from rageval_pipeline.core.retrieval.dense import DenseIndex
from rageval_pipeline.core.suites.loaders import read_queries
from rageval_pipeline.defs.definitions import build_definitions
from tests.conftest import make_pipeline_home
from tests.dagster_ui import BIN
from tests.jobs import DEBUG, dagster_execute, forked_steps
from tests.test_deploy_postgres import postgres_env  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
RUN_CONFIG = REPO / "deploy" / "run_config"
EMBED_STEP = re.compile(r"dense__index\.dense__embed_shard\[shard_\d+\]")


def dense_only(home: Path, shards: int) -> None:
    dense = {"retriever": "dense", "shards": shards, "chunking": {"strategy": "reference"}}
    (home / "data" / "systems.yaml").write_text(json.dumps({"systems": {"dense": dense}}))


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DenseIndex]:
    """The index built in one step's process, one shard, once for both executors; then the
    embeddings and the index are removed from its home's storage, so that a sharded run on a
    copy of that storage embeds everything again (the chunks stay)."""
    root = tmp_path_factory.mktemp("unsharded")
    with pytest.MonkeyPatch.context() as env:
        for name, value in make_pipeline_home(root).items():
            env.setenv(name, value)
        dense_only(root, 1)
        defs = build_definitions()
        result = dg.materialize(
            list(defs.assets),
            selection=dg.AssetSelection.assets(["dense", "index"]).upstream(),
            partition_key="beir-mini",
            resources=dict(defs.resources),
        )
    assert result.success
    index = DenseIndex.load(root / "storage" / "indexes" / "dense" / "beir-mini")
    shutil.rmtree(root / "storage" / "embeddings")
    shutil.rmtree(root / "storage" / "indexes")
    return root / "storage", index


@pytest.fixture
def expected(unsharded: tuple[Path, DenseIndex], pipeline_home: Path) -> DenseIndex:
    """The unsharded index; its home's storage copied into pipeline_home."""
    storage, index = unsharded
    shutil.copytree(storage, pipeline_home / "storage")
    return index


def materialize_index(home: Path, env: dict, *configs: Path) -> str:
    """`dagster job execute` of evaluate_dense's dense/index step (the job, unlike
    `asset materialize`'s implicit one, has the executor $RAGEVAL_EXECUTOR names) for
    beir-mini; its output."""
    done = dagster_execute(
        "evaluate_dense", "beir-mini", env, home, *configs, DEBUG, op="dense__index"
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return output


def assert_same_as(expected: DenseIndex, home: Path, output: str, shards: int) -> None:
    # One step per shard, each named in the run's events (from the worker, for Celery).
    assert len(set(EMBED_STEP.findall(output))) == shards
    index = DenseIndex.load(home / "storage" / "indexes" / "dense" / "beir-mini")
    assert np.array_equal(index.vectors, expected.vectors)
    assert list(index.ids) == list(expected.ids)
    queries = read_queries(home / "data" / "suites" / "beir-mini" / "queries.jsonl")
    pd.testing.assert_frame_equal(
        execute(index.search, queries, 10).drop(columns="latency_ms"),
        execute(expected.search, queries, 10).drop(columns="latency_ms"),
    )


def worker_env(home: Path) -> dict[str, str]:
    # `dagster-celery worker start` runs `celery` from PATH: this environment's.
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home / "dagster_home")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    (home / "dagster_home").mkdir(exist_ok=True)
    return env


def worker_ready(worker: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    """Wait for the worker's `ready.` line, as a deployment starts its workers before its runs:
    a run started beside a starting worker races it to create kombu's tables on the broker
    database (`duplicate key ... queue_id_sequence`, seen once in CI)."""
    deadline = time.monotonic() + timeout
    while " ready." not in log.read_text():
        assert worker.poll() is None, f"the worker exited:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no worker ready:\n{log.read_text()[-4000:]}"
        time.sleep(0.5)


def test_multiprocess_sharded_index_equals_in_process_unsharded(expected, pipeline_home, tmp_path):
    dense_only(pipeline_home, 3)
    two_at_once = forked_steps(tmp_path / "two.yaml", max_concurrent=2)
    output = materialize_index(pipeline_home, worker_env(pipeline_home), two_at_once)
    assert_same_as(expected, pipeline_home, output, 3)
    assert "dense index for beir-mini: {'shards': 3, 'n_chunks': 44, 'embedded': 44" in output


def test_celery_worker_on_postgres_sharded_index_equals_unsharded(
    pipeline_home,
    postgres_env,  # noqa: F811 (the fixture)
    expected,
):
    pytest.importorskip("dagster_celery", reason="the `deploy` extra (dagster-celery) is missing")
    dense_only(pipeline_home, 2)
    env = worker_env(pipeline_home) | postgres_env
    shutil.copy(
        REPO / "deploy" / "dagster-postgres.yaml", pipeline_home / "dagster_home" / "dagster.yaml"
    )
    server = "{user}:{password}@{host}:{port}/{db}".format(
        user=env["DAGSTER_PG_USER"],
        password=env["DAGSTER_PG_PASSWORD"],
        host=env["DAGSTER_PG_HOST"],
        port=env["DAGSTER_PG_PORT"],
        db=env["DAGSTER_PG_DB"],
    )
    env |= {
        "RAGEVAL_EXECUTOR": "celery",
        "DAGSTER_CELERY_BROKER_URL": f"sqla+postgresql+psycopg2://{server}",
        "DAGSTER_CELERY_BACKEND_URL": f"db+postgresql+psycopg2://{server}",
    }
    worker_log = pipeline_home / "worker.log"
    # `-i`: the worker imports the code and the model's library before it forks its pool, not
    # each pool process on its first step (seconds of imports each).
    preload = ("-i", "rageval_pipeline", "-i", "sentence_transformers")
    worker = subprocess.Popen(
        [
            *(str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app"),
            *("-y", str(RUN_CONFIG / "celery.yaml"), "-q", "rageval", "-l", "INFO", *preload),
        ],
        env=env,
        cwd=pipeline_home,
        stdout=worker_log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # `dagster-celery` starts `celery`: stop them together
    )
    try:
        worker_ready(worker, worker_log)
        output = materialize_index(pipeline_home, env, RUN_CONFIG / "celery.yaml")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    log = worker_log.read_text()
    assert_same_as(expected, pipeline_home, output, 2)
    # The steps ran in the worker, not in the run's process.
    assert re.search(r"Task .*execute_plan.* succeeded", log), log[-4000:]
