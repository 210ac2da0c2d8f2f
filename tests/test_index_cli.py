"""An index cut short on disk, then its run materialized alone through the real Dagster CLI:
refused with the one line that says how to rebuild it, never searched; rebuilt, it serves
again (issue 24)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rageval_pipeline.core.retrieval.base import REBUILD_INDEX

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
FORCE = Path(__file__).resolve().parents[1] / "deploy" / "run_config" / "force.yaml"


def dagster(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "dagster"), *args, "-m", "rageval_pipeline"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def materialize(select: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return dagster(
        "asset", "materialize", "--select", select, "--partition", "beir-mini", "-c", str(FORCE),
        env=env, cwd=cwd,
    )  # fmt: skip


def test_a_truncated_bm25_index_is_refused_then_rebuilt(evaluated_home):
    """The index and run of the session's beir-mini evaluation (conftest.py)."""
    pipeline_home = evaluated_home
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    (pipeline_home / "dagster_home").mkdir()
    storage = pipeline_home / "storage"
    ids = storage / "indexes" / "bm25" / "beir-mini" / "ids.json"
    run = storage / "assets" / "bm25" / "run" / "beir-mini.parquet"
    whole, stored_run = ids.stat().st_size, run.read_bytes()
    ids.write_bytes(ids.read_bytes()[:40])

    refused = materialize("bm25/run", env, pipeline_home)
    assert refused.returncode != 0
    message = f"{ids}: truncated or altered (40 of {whole} bytes): {REBUILD_INDEX}"
    assert message in refused.stdout + refused.stderr
    assert run.read_bytes() == stored_run  # nothing was searched or written

    assert materialize("bm25/index", env, pipeline_home).returncode == 0
    assert ids.stat().st_size == whole
    rerun = materialize("bm25/run", env, pipeline_home)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
