"""The real `dagster job execute` CLI: exit 0 on a passing gate, non-zero on a regression."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from rageval_pipeline.core.gate import baseline_path
from tests.jobs import BIN, dagster_execute

pytestmark = pytest.mark.slow
__all__ = ["BIN", "dagster_execute"]  # shared from tests/jobs.py (other tests import them here)


def test_gate_exit_codes_follow_the_committed_baseline(evaluated_home):
    """beir-mini evaluated with no baseline (the session's, conftest.py); the jobs after the
    baseline update are the real CLI's."""
    pipeline_home = evaluated_home
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    (pipeline_home / "dagster_home").mkdir()
    latest = pipeline_home / "storage" / "reports" / "beir-mini" / "latest"
    assert json.loads((latest / "gate.json").read_text())["passed"]  # a first run exited 0

    # Commit the evaluation as the baseline, then make the baseline claim a better nDCG@10.
    update = subprocess.run(
        [str(BIN / "rageval"), "baseline", "update", "--dataset", "beir-mini"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    path = baseline_path(pipeline_home / "data" / "baselines", "beir-mini", "bm25")
    assert str(path) in update.stdout
    good = path.read_text()
    raised = json.loads(good)
    for values in raised["per_query"].values():  # the gate judges paired per-query values
        values["nDCG@10"] = min(1.0, values["nDCG@10"] + 0.15)
    # The mean of the raised values, as a baseline file must hold (core.gate.Baseline).
    per_query = [values["nDCG@10"] for values in raised["per_query"].values()]
    raised["measures"]["nDCG@10"] = round(sum(per_query) / len(per_query), 6)
    path.write_text(json.dumps(raised))

    # Drawing fails (the plot cache is a file): a warning in the step that draws, the
    # verdict and the exit code as they were, the reports standing without figures.
    scratch = pipeline_home / "scratch"
    (scratch / "cache").mkdir(parents=True)
    (scratch / "cache" / "plots").write_text("not a folder")
    env |= {"RAGEVAL_SCRATCH": str(scratch)}
    failing = dagster_execute("evaluate_bm25", "beir-mini", env, pipeline_home)
    assert failing.returncode != 0
    output = failing.stdout + failing.stderr
    assert "nDCG@10" in output and "baseline" in output
    assert "gate - figures not drawn (" in output  # on a FAIL, the gate step draws
    assert "events.Failure: FAIL beir-mini: " in output
    assert not json.loads((latest / "gate.json").read_text())["passed"]
    assert not (latest / "plots").exists()

    path.write_text(good)
    restored = dagster_execute("evaluate_bm25", "beir-mini", env, pipeline_home)
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert "report_figures - figures not drawn (" in restored.stdout + restored.stderr
    assert json.loads((latest / "gate.json").read_text())["passed"]
    assert "<figure" not in (latest / "gate.html").read_text()
    assert not (latest / "plots").exists()


def test_malformed_suite_stops_the_job_before_any_asset_runs(pipeline_home):
    suite = pipeline_home / "data" / "suites" / "techdocs" / "suite.json"
    raw = json.loads(suite.read_text())
    del raw["queries"][12]["intent"]
    suite.write_text(json.dumps(raw))
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    (pipeline_home / "dagster_home").mkdir()
    result = dagster_execute("evaluate_bm25", "beir-mini", env, pipeline_home)
    assert result.returncode != 0
    assert f"{suite}:1: queries[12].intent: field required" in result.stdout + result.stderr
    assert not (pipeline_home / "storage" / "assets").exists(), "an asset ran"
