"""The baseline's configuration evaluated beside a built-in system (issue 33): when the chunking
changed, or the stored baseline lacks a measure the run has, the job re-runs the baseline's
recorded configuration on the same queries and the gate compares query by query against it."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from rageval_pipeline.core.gate import Baseline, load_baseline
from rageval_pipeline.core.gate.changes import rerun_reason
from rageval_pipeline.core.measures.defaults import DEFAULT_MEASURES
from rageval_pipeline.defs.definitions import build_definitions
from tests.conftest import REPO

BUDGETED = [f"{f}@{b}t" for b in (512, 1024, 2048) for f in ("EvidenceRecall", "TokenPrecision")]


def _without(baseline: dict, measures: list[str]) -> dict:
    """A baseline recorded before `measures` existed."""
    drop = lambda values: {m: v for m, v in values.items() if m not in measures}  # noqa: E731
    return baseline | {
        "measures": drop(baseline["measures"]),
        "intervals": drop(baseline["intervals"]),
        "per_query": {q: drop(values) for q, values in baseline["per_query"].items()},
    }


def test_why_the_baseline_configuration_is_re_run():
    shipped = REPO / "data" / "baselines" / "techdocs" / "bm25.json"
    base = load_baseline(shipped)
    config, measured = base.config, DEFAULT_MEASURES
    assert rerun_reason(config, base.suite, measured, base) is None  # the stored numbers serve
    assert rerun_reason(config, "another", measured, base) == "the suite changed"
    fixed = config | {"chunking": {"strategy": "fixed", "size": 512, "overlap": 128}}
    assert rerun_reason(fixed, base.suite, measured, base) == "the chunking changed"
    old = Baseline.model_validate(_without(base.model_dump(mode="json"), BUDGETED))
    assert rerun_reason(config | {"k1": 1.2}, base.suite, measured, old) == (
        "the stored baseline lacks EvidenceRecall@512t, TokenPrecision@512t and 4 more"
    )
    # An unchanged configuration's re-run would be the run itself: nothing to gain.
    assert rerun_reason(config, base.suite, measured, old) is None


def test_a_chunking_change_is_judged_against_the_baseline_configuration_run_beside_it(
    pipeline_home: Path,
):
    """techdocs, bm25 moved from the reference sections to fixed 512/128 windows, against a
    stored baseline recorded before the budget measures: the job re-runs the reference
    configuration and judges the budget measures against it, query by query."""
    data = pipeline_home / "data"
    fixed = {"strategy": "fixed", "size": 512, "overlap": 128}
    systems = {"systems": {"bm25": {"retriever": "bm25", "chunking": fixed}}}
    (data / "systems.yaml").write_text(json.dumps(systems))
    shipped = json.loads((REPO / "data" / "baselines" / "techdocs" / "bm25.json").read_text())
    (data / "baselines" / "techdocs").mkdir(parents=True)
    old = _without(shipped, BUDGETED)
    (data / "baselines" / "techdocs" / "bm25.json").write_text(json.dumps(old))

    defs, instance = build_definitions(), dg.DagsterInstance.ephemeral()
    selection = defs.resolve_job_def("evaluate_bm25").asset_layer.selected_asset_keys
    result = dg.materialize(
        list(defs.assets),
        selection=list(selection),
        partition_key="techdocs",
        resources=defs.resources,
        instance=instance,
        raise_on_error=False,  # the gate fails the step: less evidence at every budget
    )
    assert not result.success
    # The baseline configuration's whole index is built once, in the run step that times it.
    logs = [(e.step_key, e.user_message) for e in instance.all_logs(result.run_id)]
    built = [(step, m) for step, m in logs if "building the baseline configuration's" in m]
    assert len(built) == 1 and built[0][0] == "bm25__run" and "to re-run it" in built[0][1]

    latest = pipeline_home / "storage" / "reports" / "techdocs" / "latest"
    verdict = json.loads((latest / "gate.json").read_text())
    [change] = verdict["changes"]
    assert change["compared_with"] == "rerun"
    assert change["rerun_reason"] == "the chunking changed"
    compared = {c["measure"]: c for c in verdict["checks"] if c["kind"] == "baseline"}
    assert sorted(compared) == sorted(BUDGETED)
    # The re-run measured the reference sections (its own chunks, not the candidate's stored
    # ones under the same name): the numbers the shipped baseline recorded for them.
    for measure in BUDGETED:
        assert compared[measure]["reference"] == shipped["measures"][measure]
    assert compared["EvidenceRecall@512t"]["category"] == "recall_drop"
    ranking = [c for c in verdict["checks"] if c["measure"] in ("nDCG@10", "RR(rel=2)", "AP")]
    assert {c["kind"] for c in ranking} == {"value"}  # reported, never compared
    screen = (latest / "gate.md").read_text().split("## Measures that moved")[0]
    assert "| techdocs | bm25 | FAIL" in screen
    assert "| baseline configuration re-run in this run |" in screen
    recorded = shipped["recorded_at"][:10]
    assert f"the chunking changed since the stored baseline of {recorded}" in screen
    assert not [c for c in verdict["checks"] if c["kind"] == "policy"]  # no loosening
