"""The `dg` CLI from the repo root ([tool.dg] in pyproject.toml): `dg check defs` loads the
definitions, and `dg launch` runs a job with the same exit codes as `dagster job execute`:
0 on a passing gate, non-zero when the gate fails (here on a blocking absolute floor;
tests/test_cli_job.py fails it on a baseline)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.dagster_ui import BIN

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def dg(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "dg"), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def dg_env(pipeline_home: Path) -> dict:
    pytest.importorskip("dagster_dg_cli", reason="the `deploy` extra (dagster-dg-cli) is missing")
    (pipeline_home / "dagster_home").mkdir()
    return {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}


def test_dg_check_defs_loads_the_project(dg_env):
    result = dg("check", "defs", env=dg_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All definitions loaded successfully" in result.stdout + result.stderr
    # The definitions come from the `defs/` folder ([tool.dg.project] defs_module).
    listed = dg("list", "defs", "--json", env=dg_env)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert '"bm25/metrics"' in listed.stdout and '"gate"' in listed.stdout


def test_dg_check_defs_fails_on_a_malformed_systems_file(pipeline_home, dg_env):
    (pipeline_home / "data" / "systems.yaml").write_text("systems: {bm25: {retriever: bm26}}\n")
    result = dg("check", "defs", env=dg_env)
    assert result.returncode != 0
    assert "systems.yaml" in result.stdout + result.stderr


def test_dg_launch_exit_code_follows_the_gate(pipeline_home, dg_env):
    launch = ("launch", "--job", "evaluate_bm25", "--partition", "beir-mini")
    passing = dg(*launch, env=dg_env)
    assert passing.returncode == 0, passing.stderr[-3000:]

    # A blocking floor that bm25 cannot reach on beir-mini: the gate must fail the run.
    gate_file = pipeline_home / "data" / "gate.yaml"
    policy = yaml.safe_load(gate_file.read_text())
    policy["datasets"]["beir-mini"] = {"thresholds": {"nDCG@10": 0.99}}
    gate_file.write_text(yaml.safe_dump(policy))
    failing = dg(*launch, env=dg_env)
    assert failing.returncode != 0
    assert "nDCG@10" in failing.stdout + failing.stderr
