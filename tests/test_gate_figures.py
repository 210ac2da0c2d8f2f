"""The gate step writes its reports without drawing (matplotlib never imported); the
report_figures step after it draws the figures into the same report folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

# The gate, then the figures, materialized on one instance in a fresh interpreter: what each
# step imported is what it cost.
STEPS = """
import json, sys
import dagster as dg
from rageval_pipeline.defs.definitions import build_definitions

defs = build_definitions()
instance = dg.DagsterInstance.ephemeral()
out = {}
for key in ("gate", "report_figures"):
    assets = [a for a in defs.assets if dg.AssetKey(key) in a.keys]
    result = dg.materialize(
        assets, partition_key="beir-mini", resources=defs.resources, instance=instance
    )
    out[key] = [result.success, "matplotlib" in sys.modules]
print(json.dumps(out))
"""


def test_the_gate_step_draws_nothing_and_the_figures_step_completes_its_reports(
    evaluated_home, tmp_path
):
    latest = evaluated_home / "storage" / "reports" / "beir-mini" / "latest"
    reports = latest.parent
    env = os.environ | {"RAGEVAL_SCRATCH": str(tmp_path / "scratch")}  # an empty plot cache
    before = set(reports.iterdir())

    gate_only = STEPS.replace('("gate", "report_figures")', '("gate",)')
    done = subprocess.run(
        [sys.executable, "-c", gate_only], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {"gate": [True, False]}
    [stamped] = set(reports.iterdir()) - before
    for folder in (stamped, latest):
        page = (folder / "gate.html").read_text()
        assert "<figure" not in page and "<svg" not in page and "Plots" not in page
        assert not (folder / "plots").exists()
    figures = json.loads((latest / "report.json").read_text())["figures"]
    assert figures  # the model holds what the next step draws

    done = subprocess.run(
        [sys.executable, "-c", STEPS], env=env, capture_output=True, text=True, check=True
    )
    # The gate again (matplotlib still not imported), then the figures drawn.
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "gate": [True, False],
        "report_figures": [True, True],
    }
    [drawn] = set(reports.iterdir()) - before - {stamped}
    for folder in (drawn, latest):
        names = sorted(p.name for p in (folder / "plots").iterdir())
        assert names == sorted(f"{f['name']}.svg" for f in figures)
        page = (folder / "gate.html").read_text()
        assert page.count("<figure") == len(figures) and "Plots" in page
    assert (latest / "gate.json").read_bytes() == (drawn / "gate.json").read_bytes()
    assert not (stamped / "plots").exists()  # the earlier gate's folder: not this run's
    cached = sorted((tmp_path / "scratch" / "cache" / "plots").glob("*.svg"))
    assert len(cached) == len(figures)  # through the shared cache


def test_the_gate_check_is_blocking():
    """A failed verdict_passes stops what follows the gate, as Dagster's blocking checks do."""
    from rageval_pipeline.defs.definitions import build_definitions

    gate = build_definitions().resolve_assets_def("gate")
    [spec] = gate.check_specs
    assert spec.name == "verdict_passes" and spec.blocking


def test_a_failed_verdict_fails_the_gate_step_after_it_drew_the_figures(evaluated_home):
    """Dagster skips the steps after a failed one: on a FAIL the gate step draws its report's
    figures itself, then fails with the verdict line (report_figures not run); drawn again
    alone, report_figures redraws them and succeeds, and the gate's check stays failed."""
    import dagster as dg
    import yaml

    from rageval_pipeline.core.gate import Verdict
    from rageval_pipeline.defs.definitions import build_definitions
    from rageval_pipeline.defs.job_summary import verdict_line

    gate = evaluated_home / "data" / "gate.yaml"
    policy = yaml.safe_load(gate.read_text())
    policy["datasets"]["beir-mini"] = {"thresholds": {"nDCG@10": 0.99}}  # out of bm25's reach
    gate.write_text(yaml.safe_dump(policy))
    reports = evaluated_home / "storage" / "reports" / "beir-mini"
    latest, before = reports / "latest", set(reports.iterdir())

    defs, instance = build_definitions(), dg.DagsterInstance.ephemeral()

    def materialize(*keys: dg.AssetKey) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            list(defs.assets),
            selection=list(keys),
            partition_key="beir-mini",
            resources=defs.resources,
            instance=instance,
            raise_on_error=False,
        )

    def steps(result: dg.ExecuteInProcessResult) -> dict[str, str]:
        ends = ("STEP_SUCCESS", "STEP_FAILURE", "STEP_SKIPPED")
        return {
            e.step_key: e.event_type_value for e in result.all_events if e.event_type_value in ends
        }

    result = materialize(*defs.resolve_job_def("evaluate_bm25").asset_layer.selected_asset_keys)
    assert not result.success
    verdict = Verdict.model_validate_json((latest / "gate.json").read_text())
    assert not verdict.passed
    ended = steps(result)
    assert ended["gate"] == "STEP_FAILURE" and "report_figures" not in ended
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    line = verdict_line("beir-mini", verdict)
    assert failure.step_failure_data.user_failure_data.description == line
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks["verdict_passes"] is False
    [stamped] = set(reports.iterdir()) - before
    figures = json.loads((latest / "report.json").read_text())["figures"]
    assert figures
    for folder in (stamped, latest):  # the report of a blocked release has its figures
        names = sorted(p.name for p in (folder / "plots").iterdir())
        assert names == sorted(f"{f['name']}.svg" for f in figures)
        assert (folder / "gate.html").read_text().count("<figure") == len(figures)

    shutil.rmtree(latest / "plots")
    again = materialize(dg.AssetKey("report_figures"))
    assert again.success and steps(again) == {"report_figures": "STEP_SUCCESS"}
    assert len(list((latest / "plots").glob("*.svg"))) == len(figures)
    check = dg.AssetCheckKey(dg.AssetKey("gate"), "verdict_passes")
    [info] = instance.event_log_storage.get_asset_check_partition_info([check])
    assert info.partition_key == "beir-mini"
    assert info.latest_execution_status.value == "FAILED"
