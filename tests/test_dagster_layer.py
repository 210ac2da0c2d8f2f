"""The Dagster wiring: the nightly schedule, what each job selects, code versions from the
systems' fingerprints, and warm re-runs that reuse chunks, indexes and runs."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow.parquet as pq
import pytest

from rageval_pipeline.core.storage.warehouse import Warehouse
from rageval_pipeline.core.suites import chunking
from rageval_pipeline.core.systems import load_systems
from rageval_pipeline.defs import failures
from rageval_pipeline.defs.assets import gate as gate_module
from rageval_pipeline.defs.definitions import build_definitions
from rageval_pipeline.defs.resources import Settings
from rageval_pipeline.defs.schedules import NIGHTLY_ENV

INGEST = {"beir_archive", "corpus", "queries", "qrels"}
GATE = {"gate", "report_figures"}  # every job that gates draws the report's figures after


def _chain(system: str, indexed: bool = True) -> set[str]:
    stages = ("chunks", "index", "run", "metrics") if indexed else ("run", "metrics")
    return {f"{system}/{stage}" for stage in stages}


@pytest.fixture(scope="module")
def shipped() -> dg.Definitions:
    """The definitions of the shipped data folder (bm25, dense, hybrid; every bundled suite)."""
    return build_definitions()


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (None, ["techdocs", "hotel"]),
        (" beir-mini, techdocs ,", ["beir-mini", "techdocs"]),
        ("hotel", ["hotel"]),
    ],
)
def test_nightly_requests_the_configured_partitions(shipped, monkeypatch, names, expected):
    if names is None:
        monkeypatch.delenv(NIGHTLY_ENV, raising=False)
    else:
        monkeypatch.setenv(NIGHTLY_ENV, names)
    schedule = shipped.resolve_schedule_def("nightly")
    context = dg.build_schedule_context(
        repository_def=shipped.get_repository_def(),
        scheduled_execution_time=datetime(2026, 3, 4, 2, 0, tzinfo=UTC),
    )
    requests = schedule.evaluate_tick(context).run_requests
    assert [r.partition_key for r in requests] == expected
    assert [r.run_key for r in requests] == [f"{n}-2026-03-04" for n in expected]
    assert schedule.job_name == "evaluate_dataset"
    assert (schedule.cron_schedule, schedule.execution_timezone) == ("0 2 * * *", "UTC")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ("evaluate_bm25", INGEST | _chain("bm25") | GATE),
        ("evaluate_dense", INGEST | _chain("dense") | GATE),
        # A fusion evaluates what it fuses (up to the members' runs), not the members' metrics.
        (
            "evaluate_hybrid",
            INGEST
            | (_chain("bm25") - {"bm25/metrics"})
            | (_chain("dense") - {"dense/metrics"})
            | _chain("hybrid", indexed=False)
            | GATE,
        ),
        (
            "evaluate_dataset",
            INGEST | _chain("bm25") | _chain("dense") | _chain("hybrid", False) | GATE,
        ),
        ("ingest_dataset", INGEST),
    ],
)
def test_each_job_selects_its_assets(shipped, job, expected):
    selected = shipped.resolve_job_def(job).asset_layer.selected_asset_keys
    assert {k.to_user_string() for k in selected} == expected


def test_every_asset_and_the_io_manager_turn_expected_errors_into_one_line(shipped):
    """failures.one_line_errors is applied to every asset's function (an asset added without it
    would print a chained trace for bad input) and to the IO manager's reads and writes."""
    unwrapped = [
        op.name
        for assets in shipped.assets
        for op in assets.node_def.iterate_op_defs()  # a graph-backed asset's every op
        if not getattr(op.compute_fn.decorated_fn, failures.MARK, False)
    ]
    assert unwrapped == []
    io_manager = type(shipped.resources["io_manager"])
    assert getattr(io_manager.handle_output, failures.MARK) is True
    assert getattr(io_manager.load_input, failures.MARK) is True


def _code_versions(data: Path, systems: dict) -> dict[str, str | None]:
    (data / "systems.yaml").write_text(json.dumps({"systems": systems}))
    graph = build_definitions().resolve_asset_graph()
    return {k.to_user_string(): graph.get(k).code_version for k in graph.get_all_asset_keys()}


def test_code_versions_follow_each_systems_configuration(pipeline_home):
    data = pipeline_home / "data"
    bm25 = {"retriever": "bm25", "chunking": {"strategy": "reference"}}
    fused = {"retriever": "rrf", "members": ["bm25", "other"]}
    other = {"retriever": "bm25", "k1": 1.2}
    base = _code_versions(data, {"bm25": bm25, "other": other, "fused": fused})
    assert all(base.values()) and "1" not in base.values()
    fingerprint = load_systems(data / "systems.yaml")["bm25"].fingerprint()
    assert {s: base[f"bm25/{s}"].split(".")[0] for s in ("index", "run", "metrics")} == dict(
        index=fingerprint, run=fingerprint, metrics=fingerprint
    )

    changed = _code_versions(data, {"bm25": bm25 | {"k1": 0.9}, "other": other, "fused": fused})
    moved = {k for k in base if base[k] != changed[k]}
    # k1 changes bm25's index, run and metrics, and the fusion built on it; not its chunks.
    assert moved == {"bm25/index", "bm25/run", "bm25/metrics", "fused/run", "fused/metrics"}

    rechunked = _code_versions(
        data,
        {"bm25": bm25 | {"chunking": {"strategy": "document"}}, "other": other, "fused": fused},
    )
    assert {k for k in base if base[k] != rechunked[k]} == moved | {"bm25/chunks"}

    (data / "gate.yaml").write_text((data / "gate.yaml").read_text() + "\n# edited\n")
    regated = _code_versions(data, {"bm25": bm25, "other": other, "fused": fused})
    assert {k for k in base if base[k] != regated[k]} == {"gate"}


def _materialize(defs: dg.Definitions, **settings) -> dg.ExecuteInMemoryResult:
    resources = dict(defs.resources) | {"settings": Settings(**settings)}
    selection = defs.resolve_job_def("evaluate_bm25").asset_layer.selected_asset_keys
    result = dg.materialize(
        list(defs.assets),
        selection=list(selection),
        partition_key="beir-mini",
        resources=resources,
    )
    assert result.success
    return result


def _reused(result: dg.ExecuteInMemoryResult) -> dict[str, bool | None]:
    out = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        value = materialization.metadata.get("reused")
        out[materialization.asset_key.to_user_string()] = None if value is None else value.value
    return out


def _metadata(result: dg.ExecuteInMemoryResult, asset: str) -> dict:
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.to_user_string() == asset:
            return {k: v.value for k, v in materialization.metadata.items()}
    raise AssertionError(f"{asset} was not materialized")


def test_a_warm_rerun_reuses_every_stage_and_still_gates(pipeline_home):
    storage = pipeline_home / "storage"
    run_file = storage / "assets" / "bm25" / "run" / "beir-mini.parquet"
    stages = ("corpus", "queries", "qrels", "bm25/chunks", "bm25/index", "bm25/run", "bm25/metrics")
    tables = [storage / "assets" / f"{s}/beir-mini.parquet" for s in stages if s != "bm25/index"]
    defs = build_definitions()
    cold_result = _materialize(defs)
    cold = _reused(cold_result)
    assert cold == {"beir_archive": None, "gate": None, "report_figures": None} | {
        s: False for s in stages
    }
    first_run = pq.read_table(run_file).to_pandas()
    files = [p for p in (storage / "indexes").rglob("*") if p.is_file()] + tables
    written = {p: p.stat().st_mtime_ns for p in files}
    measured = _metadata(cold_result, "bm25/metrics")

    warm_result = _materialize(defs)
    warm = _reused(warm_result)
    assert warm == {"beir_archive": None, "gate": None, "report_figures": None} | {
        s: True for s in stages
    }
    # Reused means untouched: no index file or stored table was rewritten, the run is the
    # same run (latencies included: they were measured once).
    assert {p: p.stat().st_mtime_ns for p in files} == written
    pd.testing.assert_frame_equal(pq.read_table(run_file).to_pandas(), first_run)
    # The same evaluation is not stored twice; the warm job's gate judged the reused run.
    again = _metadata(warm_result, "bm25/metrics")
    assert {k: v for k, v in again.items() if k != "reused"} == {
        k: v for k, v in measured.items() if k != "reused"
    }
    store = Warehouse.existing(storage)
    assert store.query("SELECT count(*) AS n FROM runs")["n"][0] == 1
    assert _metadata(warm_result, "gate")["runs"] == measured["run_id"]
    reuses = store.query("SELECT run_id, dagster_run_id FROM run_reuses")
    assert reuses.to_dict("records") == [
        {"run_id": measured["run_id"], "dagster_run_id": warm_result.run_id}
    ]

    # A different depth changes the run's inputs, not the chunks' or the index's.
    deeper = _reused(_materialize(defs, top_k=5))
    assert [deeper[f"bm25/{s}"] for s in ("chunks", "index", "run", "metrics")] == [
        True,
        True,
        False,
        False,
    ]

    forced = _reused(_materialize(defs, force=True))
    assert {s: forced[s] for s in stages} == {s: False for s in stages}
    assert {p for p in written if p.stat().st_mtime_ns != written[p]}  # rebuilt
    assert store.query("SELECT count(*) AS n FROM runs")["n"][0] == 3


def test_the_seed_report_takes_chunk_integrity_from_the_runs_own_checks(pipeline_home, monkeypatch):
    """In a job, seed 003's report has the integrity rates the chunks checks of that run
    measured (the gate reads and hashes no chunks); the gate materialized alone measures them
    on the stored chunks, to the same report."""
    folder = pipeline_home / "storage" / "reports" / "validation" / "beir-mini" / "bm25"

    def latest_report() -> dict:
        report = json.loads(max(folder.glob("report_*.json")).read_text())
        assert report.pop("timestamp")
        return report

    def measured_again(chunks):
        raise AssertionError("the chunks checks of this run measured it already")

    defs = build_definitions()
    monkeypatch.setattr(gate_module, "integrity", measured_again)
    _materialize(defs)
    in_job = latest_report()
    assert (in_job["metadata_completeness_rate"], in_job["hash_validation_pass_rate"]) == (1, 1)
    assert all(case["query"]["text"] for case in in_job["test_cases"])

    measured, real = [], chunking.integrity
    monkeypatch.setattr(gate_module, "integrity", lambda c: measured.append(len(c)) or real(c))
    gate = next(a for a in defs.assets if dg.AssetKey("gate") in a.keys)
    assert dg.materialize([gate], partition_key="beir-mini", resources=defs.resources).success
    chunks = pq.read_metadata(pipeline_home / "storage/assets/bm25/chunks/beir-mini.parquet")
    assert measured == [chunks.num_rows]
    assert latest_report() == in_job


def test_a_reused_evaluation_missing_from_the_warehouse_is_measured_again(pipeline_home):
    defs = build_definitions()
    first = _metadata(_materialize(defs), "bm25/metrics")
    store = Warehouse.existing(pipeline_home / "storage")
    with store.connect() as con:
        con.execute("DELETE FROM runs")
    again = _materialize(defs)
    assert _reused(again)["bm25/metrics"] is False
    assert _metadata(again, "gate")["runs"] == _metadata(again, "bm25/metrics")["run_id"]
    assert _metadata(again, "bm25/metrics")["run_id"] != first["run_id"]


def test_the_shipped_examples_uncommented_build_a_job_each(pipeline_home):
    # Dagster names each system's asset group and job after it: the examples must load.
    shipped = (Path(__file__).parent.parent / "data" / "systems.yaml").read_text()
    head, examples = shipped.split("# --- other kinds")
    lines = [
        line[:2] + line[4:] if line.startswith("  # ") else "" for line in examples.split("\n")
    ]
    (pipeline_home / "data" / "systems.yaml").write_text(head + "\n".join(lines[1:]))
    (pipeline_home / "data" / "runs").mkdir()
    (pipeline_home / "data" / "runs" / "ours.trec").write_text("q1 Q0 d1 1 2.5 ours\n")
    names = [j.name for j in build_definitions().resolve_all_job_defs()]
    expected = ["bm25_fixed", "hybrid_weighted", "ours_offline", "ours_http", "ours_python"]
    assert {f"evaluate_{n}" for n in ["bm25", "dense", "hybrid", *expected]} <= set(names)


def test_a_missing_index_is_rebuilt_even_when_its_key_matches(pipeline_home):
    import shutil

    defs = build_definitions()
    _materialize(defs)
    shutil.rmtree(pipeline_home / "storage" / "indexes" / "bm25" / "beir-mini")
    again = _reused(_materialize(defs))
    assert [again[f"bm25/{s}"] for s in ("chunks", "index", "run")] == [True, False, True]
    assert again["bm25/metrics"] is True  # the index was rebuilt, the run (its input) is the same


def test_a_live_service_is_asked_again_and_so_is_a_fusion_of_it(
    pipeline_home,
):
    data = pipeline_home / "data"
    shutil.copy(Path(__file__).parent / "fixtures" / "retrieval" / "my_search.py", data)
    systems = {
        "bm25": {"retriever": "bm25", "chunking": {"strategy": "reference"}},
        "ours": {"retriever": "python", "entry_point": "my_search:dicts"},
        "both": {"retriever": "rrf", "level": "document", "members": ["bm25", "ours"]},
    }
    (data / "systems.yaml").write_text(json.dumps({"systems": systems}))
    defs = build_definitions()
    selection = ["bm25/run", "ours/run", "both/run"]

    def reused() -> dict:
        result = dg.materialize(
            list(defs.assets),
            selection=dg.AssetSelection.assets(["both", "run"]).upstream(),
            partition_key="beir-mini",
            resources=defs.resources,
        )
        assert result.success
        return {k: v for k, v in _reused(result).items() if k in selection}

    assert reused() == {"bm25/run": False, "ours/run": False, "both/run": False}
    # The service is asked again; its answers (and latencies) may differ, so the fusion built
    # on them is made again too, while bm25's run is reused.
    assert reused() == {"bm25/run": True, "ours/run": False, "both/run": False}


@pytest.mark.parametrize("collector_on", [True, False])
def test_the_code_location_freezes_its_heap_and_keeps_the_collector_as_it_was(
    tmp_path, collector_on
):
    import subprocess
    import sys

    script = (
        "import gc\n"
        f"gc.enable() if {collector_on} else gc.disable()\n"
        "import rageval_pipeline.definitions as d\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 100_000, 'gate' in {\n"
        "    k.to_user_string() for k in d.defs.resolve_asset_graph().get_all_asset_keys()})\n"
    )
    env = {**os.environ, "RAGEVAL_STORAGE": str(tmp_path / "storage")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(collector_on), "True", "True"]
