"""What people read after `dagster job execute` (the real CLI, the shipped dagster.yaml): each
dataset's own verdict in the instance, INFO-level output, the gate's failure and expected errors
as one line, and scripts/evaluate's summary ending with the verdict or the first error."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest
import yaml
from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, DagsterInstance
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from rageval_pipeline.core.gate import Verdict
from rageval_pipeline.defs.job_summary import summary, verdict_line
from tests.conftest import REPO
from tests.test_cli_job import dagster_execute

pytestmark = pytest.mark.slow


def _instance_env(home: Path) -> dict:
    """The environment of a job on an instance set up as scripts/setup does (dagster.yaml)."""
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(REPO / "dagster.yaml", dagster_home / "dagster.yaml")
    return {**os.environ, "DAGSTER_HOME": str(dagster_home)}


def _latest_check_status(home: Path) -> dict[str, AssetCheckExecutionRecordStatus]:
    """Per dataset partition, the status of the gate check's latest evaluation."""
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")  # restored by monkeypatch
    with DagsterInstance.get() as instance:
        infos = instance.event_log_storage.get_asset_check_partition_info(
            [AssetCheckKey(AssetKey("gate"), "verdict_passes")]
        )
    return {info.partition_key: info.latest_execution_status for info in infos}


def _gate_metadata(home: Path, partition: str) -> dict:
    """The metadata of the gate's latest materialization of `partition`."""
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")  # restored by monkeypatch
    with DagsterInstance.get() as instance:
        [record] = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("gate"), asset_partitions=[partition]), limit=1
        ).records
    return dict(record.asset_materialization.metadata)


def test_each_dataset_keeps_its_own_verdict_in_one_line(pipeline_home, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", os.environ.get("DAGSTER_HOME", ""))
    env = _instance_env(pipeline_home)
    gate = pipeline_home / "data" / "gate.yaml"
    policy = yaml.safe_load(gate.read_text())
    policy["datasets"]["techdocs"]["thresholds"] = {"nDCG@10": 0.99}  # out of bm25's reach
    gate.write_text(yaml.safe_dump(policy))

    passing = dagster_execute("evaluate_bm25", "beir-mini", env, pipeline_home)
    assert passing.returncode == 0, passing.stderr[-3000:]
    failing = dagster_execute("evaluate_bm25", "techdocs", env, pipeline_home)
    assert failing.returncode != 0

    # Each partition's latest check evaluation is its own dataset's verdict; techdocs, judged
    # last, does not hide beir-mini's.
    assert _latest_check_status(pipeline_home) == {
        "beir-mini": AssetCheckExecutionRecordStatus.SUCCEEDED,
        "techdocs": AssetCheckExecutionRecordStatus.FAILED,
    }
    reports = pipeline_home / "storage" / "reports"
    verdicts = {
        name: Verdict.model_validate_json((reports / name / "latest" / "gate.json").read_text())
        for name in ("beir-mini", "techdocs")
    }
    assert [verdicts["beir-mini"].passed, verdicts["techdocs"].passed] == [True, False]

    output = failing.stdout + failing.stderr
    assert " - DEBUG - " not in output and " - INFO - " in output
    line = verdict_line("techdocs", verdicts["techdocs"])
    assert line.startswith("FAIL techdocs: 1 blocking failure(s)")
    assert f"dagster._core.definitions.events.Failure: {line}\n" in output
    # The gate step fails, as its figures' step would be skipped: it drew them before failing.
    assert 'Execution of step "gate" failed.\n\n' in output
    assert "Dependencies for step report_figures failed: ['gate']. Not executing." in output
    assert 'step "report_figures"' not in output
    figures = json.loads((reports / "techdocs" / "latest" / "report.json").read_text())["figures"]
    stamped = Path(_gate_metadata(pipeline_home, "techdocs")["report_html"].path).parent
    assert figures and stamped.parent == reports / "techdocs"
    for folder in (stamped, reports / "techdocs" / "latest"):
        names = sorted(p.name for p in (folder / "plots").glob("*.svg"))
        assert names == sorted(f"{f['name']}.svg" for f in figures)
        assert (folder / "gate.html").read_text().count("<figure") == len(figures)
    assert "DagsterAssetCheckFailedError" not in output
    assert "techdocs/bm25 nDCG@10 = " in output  # the failed check, logged once as ERROR

    log = pipeline_home / "techdocs.log"
    log.write_text(output)
    printed = summary(pipeline_home / "storage", "techdocs", log, failing.returncode, since=0)
    assert printed.splitlines()[-1] == line
    assert f"Reports: {reports / 'techdocs' / 'latest'}/gate.html" in printed


def test_an_unreachable_mirror_is_one_line_without_a_trace(pipeline_home, monkeypatch):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _instance_env(pipeline_home) | {
        "RAGEVAL_BEIR_MIRROR": f"http://127.0.0.1:{port}",
        "RAGEVAL_BEIR_ATTEMPTS": "1",
    }
    result = dagster_execute("evaluate_bm25", "scifact", env, pipeline_home)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    failures = [line for line in output.splitlines() if "events.Failure: " in line]
    assert failures, output[-3000:]
    message = failures[0].split("events.Failure: ", 1)[1]
    assert message.startswith(f"http://127.0.0.1:{port}/scifact.zip: ")
    # Without any run config, Dagster prints the step's failure and the run's, each as the line
    # alone: no stack of Dagster's frames (defs/failures.py) and no NetworkError trace chained.
    assert len(failures) == 2 and set(failures) == {failures[0]}
    assert "Stack Trace" not in output and "File " not in output
    assert "Traceback" not in output and "was caused by" not in output
    assert "NetworkError" not in output and " - DEBUG - " not in output

    log = pipeline_home / "scifact.log"
    log.write_text(output)
    printed = summary(pipeline_home / "storage", "scifact", log, result.returncode, since=0)
    assert printed.splitlines()[-1] == f"FAIL scifact (before the gate): {message}"


def test_bad_input_while_the_definitions_load_is_one_line(pipeline_home):
    """Before any step: a bad systems.yaml is click's one `Error:` line and exit 2, not the
    trace of Dagster's loader (defs/failures.py, LoadRefused)."""
    systems = pipeline_home / "data" / "systems.yaml"
    systems.write_text("systems: {bad: {retriever: nope}}\n")
    result = dagster_execute(
        "evaluate_bm25", "techdocs", _instance_env(pipeline_home), pipeline_home
    )
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.startswith("Error")]
    assert line.startswith(f"Error: {systems}:1: systems[\"bad\"]: Input tag 'nope' found")
