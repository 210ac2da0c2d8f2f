"""The experiments log: one row per gated evaluation, through the real CLI."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rageval_pipeline.core.gate import GatePolicy, baseline_from_summary, decide
from rageval_pipeline.core.history import experiments
from rageval_pipeline.core.storage.warehouse import Warehouse
from tests.jobs import dagster_execute
from tests.test_baseline_cli import poor_run_file, rageval, summary

BIN = Path(sys.executable).parent


def test_experiments_record_number_and_export_in_seed_shape(tmp_path):
    policy = GatePolicy.model_validate({"version": 1})
    base = summary(0.8, {"chunking": {"size": 512}})
    baselines = {("d", "s"): baseline_from_summary(base)}
    store = Warehouse(tmp_path / "w.duckdb")
    when = datetime(2026, 1, 5, tzinfo=UTC)
    for ndcg, size in ((0.5, 256), (0.9, 128)):
        run = summary(ndcg, {"chunking": {"size": size}})
        verdict = decide([run], baselines, policy)
        experiments.record(store, verdict, [run], baselines, description=None, created_at=when)
    first, second = experiments.load(store)
    assert (first.id, first.verdict, second.id, second.verdict) == (
        "exp-001",
        "REJECTED",
        "exp-002",
        "ACCEPTED",
    )
    assert first.config_changes == {"chunking.size": [512, 256]}
    assert first.description == "chunking.size: 512 -> 256" and "nDCG@10" in first.reason
    assert second.reason == "all checks passed; improved: nDCG@10"
    experiments.export([first, second], tmp_path / "experiments.json")
    entry = json.loads((tmp_path / "experiments.json").read_text())["experiments"][0]
    assert entry["config_changes"] == {"chunking.size": 256} and entry["date"] == "2026-01-05"
    assert entry["verdict"].startswith("REJECTED (") and entry["results"]["nDCG@10"] == 0.5
    assert experiments.load(store, system="other") == []


def execute(env: dict, cwd: Path, description: str | None = None) -> int:
    tags = {experiments.DESCRIPTION_TAG: description} if description else {}
    return dagster_execute("evaluate_dataset", "beir-mini", env, cwd, **tags).returncode


@pytest.mark.slow
def test_one_row_per_gated_run_with_verdict_and_config_diff(evaluated_home):
    """The first gated run is the session's beir-mini evaluation (conftest.py); the two after
    it are the real CLI's."""
    pipeline_home = evaluated_home
    data = pipeline_home / "data"
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    (pipeline_home / "dagster_home").mkdir()
    assert rageval("baseline", "update", "--dataset", "beir-mini", env=env).returncode == 0
    # A parameter change, described by the run tag; its verdict is whatever the gate said.
    bm25 = {"retriever": "bm25", "chunking": {"strategy": "reference"}, "k1": 0.9}
    (data / "systems.yaml").write_text(json.dumps({"systems": {"bm25": bm25}}))
    tuned = execute(env, pipeline_home, description="Lower BM25 k1 to 0.9")
    poor_run_file(data)
    poor = {"retriever": "run_file", "path": "poor.trec"}
    (data / "systems.yaml").write_text(json.dumps({"systems": {"bm25": poor}}))
    assert execute(env, pipeline_home) != 0

    listed = rageval("experiments", "--dataset", "beir-mini", "--system", "bm25", env=env)
    assert listed.returncode == 0, listed.stderr
    log = experiments.load(Warehouse(pipeline_home / "storage" / "rageval.duckdb"))
    assert [e.id for e in log] == ["exp-001", "exp-002", "exp-003"]
    assert [e.verdict for e in log] == [
        "ACCEPTED",
        "ACCEPTED" if tuned == 0 else "REJECTED",
        "REJECTED",
    ]
    assert log[0].reason == "no baseline: absolute limits passed" and log[0].config_changes == {}
    assert log[1].description == "Lower BM25 k1 to 0.9"
    assert log[1].config_changes == {"k1": [1.5, 0.9]}
    assert log[2].config_changes["retriever"] == ["bm25", "run_file"]
    assert "k1: 1.5 -> 0.9" in listed.stdout and "exp-003" in listed.stdout
    exported = json.loads((pipeline_home / "storage" / "reports" / "experiments.json").read_text())
    assert [e["id"] for e in exported["experiments"]] == ["exp-001", "exp-002", "exp-003"]


def test_a_warehouse_without_experiments_lists_none(tmp_path):
    from tests.test_storage import _results, _run_row

    store = Warehouse(tmp_path / "w.duckdb")
    store.record_run(_run_row("r1"), _results("r1", 0.5))
    assert experiments.load(store) == []
