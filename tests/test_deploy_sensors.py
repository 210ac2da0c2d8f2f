"""The deployment's automation: the version sensor (cursor of system fingerprints), the nightly
schedule over suites and BEIR datasets, and the freshness check on the latest evaluation."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState
from dagster._core.workspace.load_target import PythonFileTarget
from dagster._daemon.freshness import FreshnessDaemon

from rageval_pipeline.defs.definitions import build_definitions
from rageval_pipeline.defs.resources import Settings
from rageval_pipeline.defs.schedules import BEIR_ENV, NIGHTLY_ENV

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def team_home(pipeline_home: Path) -> Path:
    """pipeline_home plus the team's own system: a TREC run file."""
    data = pipeline_home / "data"
    (data / "runs").mkdir()
    (data / "runs" / "ours.trec").write_text("q1 Q0 d1 1 2.0 ours\nq1 Q0 d2 2 1.0 ours\n")
    systems = json.loads((data / "systems.yaml").read_text())
    systems["systems"]["ours"] = {"retriever": "run_file", "path": "runs/ours.trec"}
    (data / "systems.yaml").write_text(json.dumps(systems))
    return pipeline_home


def tick(defs: dg.Definitions, cursor: str | None):
    sensor = defs.resolve_sensor_def("new_system_version")
    return sensor.evaluate_tick(dg.build_sensor_context(cursor=cursor, definitions=defs))


def test_version_sensor_starts_an_evaluation_when_the_run_file_changes(team_home, monkeypatch):
    monkeypatch.setenv(NIGHTLY_ENV, "techdocs,beir-mini")
    defs = build_definitions(Settings())

    first = tick(defs, None)
    assert first.run_requests == [] and "recorded the versions of 2" in first.skip_message
    cursor = first.cursor
    assert set(json.loads(cursor)) == {"bm25", "ours"}

    same = tick(defs, cursor)
    assert same.run_requests == [] and same.skip_message.startswith("no new system version")

    run_file = team_home / "data" / "runs" / "ours.trec"
    run_file.write_text(run_file.read_text().replace("d2 2 1.0", "d3 2 1.0"))
    changed = tick(defs, cursor)
    requests = {(r.job_name, r.partition_key) for r in changed.run_requests}
    assert requests == {("evaluate_ours", "techdocs"), ("evaluate_ours", "beir-mini")}
    new_version = json.loads(changed.cursor)["ours"]
    assert new_version != json.loads(cursor)["ours"]
    assert all(r.tags["rageval/fingerprint"] == new_version for r in changed.run_requests)
    # Run keys carry the version: the same change never starts the same evaluation twice.
    again = tick(defs, changed.cursor)
    assert again.run_requests == []


def test_version_sensor_sees_a_new_configuration_of_a_system(team_home, monkeypatch):
    monkeypatch.setenv(NIGHTLY_ENV, "techdocs")
    defs = build_definitions(Settings())
    first = tick(defs, None)
    systems_file = team_home / "data" / "systems.yaml"
    systems = json.loads(systems_file.read_text())
    systems["systems"]["bm25"]["k1"] = 1.2
    systems_file.write_text(json.dumps(systems))
    changed = tick(defs, first.cursor)
    assert [(r.job_name, r.partition_key) for r in changed.run_requests] == [
        ("evaluate_bm25", "techdocs")
    ]


def test_version_sensor_reports_a_missing_run_file_in_one_line(team_home, monkeypatch):
    defs = build_definitions(Settings())
    first = tick(defs, None)
    (team_home / "data" / "runs" / "ours.trec").unlink()
    result = tick(defs, first.cursor)
    assert result.run_requests == []
    # The problem as core.systems words it: the file, the field and what is wrong, one line.
    message = result.skip_message
    assert "runs/ours.trec" in message and "path" in message and "\n" not in message


def test_nightly_schedule_covers_suites_and_configured_beir_datasets(pipeline_home, monkeypatch):
    monkeypatch.setenv(NIGHTLY_ENV, "techdocs, beir-mini")
    monkeypatch.setenv(BEIR_ENV, "nfcorpus,scifact,techdocs")
    defs = build_definitions(Settings())
    schedule = defs.resolve_schedule_def("nightly")
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 2, 2, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
    )
    requests = schedule.evaluate_tick(context).run_requests
    assert [r.partition_key for r in requests] == ["techdocs", "beir-mini", "nfcorpus", "scifact"]
    assert requests[2].run_key == "nfcorpus-2026-11-02"


FRESHNESS_DEFS = """
import dagster as dg
from rageval_pipeline.defs.freshness import fresh_daily

@dg.asset(name="gate")
def gate() -> None:
    return None

defs = dg.Definitions(assets=[fresh_daily(gate)])
"""


def test_freshness_policy_fails_an_evaluation_older_than_a_day(tmp_path):
    """Dagster's own freshness daemon judges the gate's policy, as a deployment would."""
    # Imported here: Dagster's test utilities cost 1.5 s at every collection (each xdist worker).
    from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time

    module = tmp_path / "fresh_defs.py"
    module.write_text(FRESHNESS_DEFS)
    target = PythonFileTarget(
        python_file=str(module), attribute="defs", working_directory=str(REPO), location_name="t"
    )
    key = dg.AssetKey("gate")
    with (
        dg.instance_for_test(overrides={"freshness": {"enabled": True}}) as instance,
        create_test_daemon_workspace_context(target, instance) as workspace,
    ):

        def state() -> FreshnessState:
            asyncio.run(FreshnessDaemon()._evaluate_assets(workspace))
            return instance.get_freshness_state_records([key])[key].freshness_state

        assert state() == FreshnessState.UNKNOWN  # never evaluated
        instance.report_runless_asset_event(dg.AssetMaterialization(key))
        assert state() == FreshnessState.PASS
        with freeze_time(time.time() + 23 * 3600):
            assert state() == FreshnessState.PASS
        with freeze_time(time.time() + 25 * 3600):
            assert state() == FreshnessState.FAIL
