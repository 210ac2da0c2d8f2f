"""PPI in the main gate (issue 32): techdocs carrying a companion LLM-labelled query set with a
random human sample, made by `rageval synth` and `rageval label` against the scripted loopback
judge (tests/scripted_judge.py), is evaluated by `evaluate_dataset`, and the gate decides under
`statistics.rule: ppi` with the PPI++ delta over the companion population; the suite's own
human-only numbers stay the suite's."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import pytest
import yaml

from rageval_pipeline.cli import main
from rageval_pipeline.core.generation.config import SWITCHES
from rageval_pipeline.core.statistics.sampling import load_sample
from rageval_pipeline.core.storage.warehouse import Warehouse
from rageval_pipeline.defs.definitions import build_definitions
from tests.scripted_judge import grade_like_a_human, serve
from tests.test_cli_job import dagster_execute
from tests.test_generation_job import base_env

pytestmark = pytest.mark.slow
SUITE = "techdocs"


@pytest.fixture
def companion(pipeline_home, monkeypatch):
    """The companion set, its graded sample sheet and its LLM labels, committed beside the
    suite and stored where `label_dataset` writes them."""
    fake = serve(monkeypatch)
    data = pipeline_home / "data"
    # The scripted judge is a poor one: its kappa with techdocs' evidence-level grades is 0.299
    # (0.32 with round 1's); the floor is lowered so that its labels may be used at all.
    policy = yaml.safe_load((data / "gate.yaml").read_text())
    policy["datasets"][SUITE]["calibration"] = {"min_kappa": 0.25}
    (data / "gate.yaml").write_text(yaml.safe_dump(policy))
    suite = data / "suites" / SUITE
    storage = pipeline_home / "storage"
    made = pipeline_home / "synthetic"
    try:
        args = ["synth", str(suite), "--n", "16", "--human-sample-size", "4", "--depth", "3"]
        assert main([*args, "--output", str(made)]) == 0
        grade_like_a_human(made / f"{SUITE}.synthetic.sheet.jsonl")
        for name in (
            f"{SUITE}.synthetic.jsonl",
            "sample.json",
            "frame.json",
            f"{SUITE}.synthetic.sheet.jsonl",
        ):
            shutil.copy(made / name, suite / name)
        args = ["label", str(suite), "--synthetic", str(suite / f"{SUITE}.synthetic.jsonl")]
        assert main([*args, "--depth", "3", "--output", str(storage / "labels" / SUITE)]) == 0
    finally:
        fake.stop()
    for name in SWITCHES:  # the evaluation itself calls no LLM
        monkeypatch.delenv(name, raising=False)
    return load_sample(suite / "sample.json")


def test_evaluate_dataset_decides_with_ppi_over_the_companion_set(pipeline_home, companion):
    data, storage = pipeline_home / "data", str(pipeline_home / "storage")
    defs = build_definitions()
    first = dg.materialize(
        list(defs.assets), partition_key=SUITE, resources=defs.resources, raise_on_error=False
    )
    assert first.success
    assert main(["baseline", "update", "--dataset", SUITE, "--storage", storage]) == 0
    baseline = json.loads((data / "baselines" / SUITE / "bm25.json").read_text())
    assert set(baseline["sample_per_query"]) == set(companion.drawn())
    assert set(baseline["llm_per_query"]) <= set(companion.frame)
    assert not set(baseline["per_query"]) & set(companion.frame)  # the suite's own, unmixed

    policy = yaml.safe_load((data / "gate.yaml").read_text())
    policy["datasets"][SUITE]["statistics"] = {"rule": "ppi"}
    (data / "gate.yaml").write_text(yaml.safe_dump(policy))
    systems = {
        "bm25": {"retriever": "bm25", "chunking": {"strategy": "reference"}, "k1": 0.3, "b": 0.1}
    }
    (data / "systems.yaml").write_text(json.dumps({"systems": systems}))
    done = dagster_execute("evaluate_dataset", SUITE, base_env(pipeline_home), pipeline_home)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]

    reports = pipeline_home / "storage" / "reports" / SUITE / "latest"
    verdict = json.loads((reports / "gate.json").read_text())
    compared = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    [ndcg] = [c for c in compared if c["measure"] == "nDCG@10"]
    assert "PPI++ paired delta" in ndcg["message"] and ndcg["paired"]["n"] == len(companion.frame)
    # The first screen puts the human-only interval on the drawn queries beside the PPI++ one.
    assert ndcg["paired"]["human_only"]["n"] == len(companion.drawn())
    first_screen = (reports / "gate.md").read_text().split("## What this suite can tell")[1]
    assert "| Effective n |" in first_screen.split("\n## ")[0]
    assert done.returncode == (0 if verdict["passed"] else 1)
    warehouse = Warehouse(pipeline_home / "storage" / "rageval.duckdb")
    rows = warehouse.query(
        "SELECT label_source, n_human, n_llm FROM ppi_metrics WHERE measure = 'nDCG@10' "
        "AND label_source = 'ppi'"
    )
    assert rows.values.tolist() == [["ppi", 4, len(companion.frame)]] * 2
