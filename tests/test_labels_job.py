"""Issue 26 end to end: the `label_dataset` job through the real `dagster job execute` CLI on
techdocs against a loopback OpenAI-compatible server that writes queries and grades passages
from their content (tests/scripted_judge.py): synthesis, labelling, calibration, then a re-run
that asks the server nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rageval_pipeline.core.generation import synthetic
from rageval_pipeline.core.statistics.sampling import load_sample
from tests.jobs import dagster_execute
from tests.llm_servers import FakeLLM
from tests.scripted_judge import grade_like_a_human, reply
from tests.test_generation_job import base_env

pytestmark = pytest.mark.slow
RUN_CONFIG = {"resources": {"labels": {"config": {"n": 16, "human_sample": 4, "depth": 3}}}}


def execute(job: str, env: dict, home) -> subprocess.CompletedProcess:
    config = home / "labels.json"
    config.write_text(json.dumps(RUN_CONFIG))
    return dagster_execute(job, "techdocs", env, home, config)


def labelled_home(data: Path, **rules) -> None:
    """Two BM25 variants in `data` (two system rankings for the calibration), and techdocs
    gated by PPI, with `rules` over its policy entry."""
    reference = {"retriever": "bm25", "chunking": {"strategy": "reference"}}
    systems = {"bm25": reference, "bm25_flat": {**reference, "k1": 0.3, "b": 0.1}}
    (data / "systems.yaml").write_text(json.dumps({"systems": systems}))
    policy = yaml.safe_load((data / "gate.yaml").read_text())
    policy["datasets"]["techdocs"] |= {"statistics": {"rule": "ppi"}, **rules}
    (data / "gate.yaml").write_text(yaml.safe_dump(policy))


def test_label_dataset_synthesizes_labels_calibrates_and_gates_with_ppi(pipeline_home):
    data = pipeline_home / "data"
    labelled_home(data, calibration={"min_kappa": 0.3})
    fake = FakeLLM("openai", reply=reply).start()
    env = {
        **base_env(pipeline_home),
        "RAGEVAL_PROVIDER": "openai",
        "RAGEVAL_OPENAI_BASE_URL": fake.url + "/v1",
        "RAGEVAL_OPENAI_MODEL": "fake-1",
        "RAGEVAL_CONCURRENCY": "4",
    }
    storage = pipeline_home / "storage"
    made = storage / "synthetic/techdocs"
    try:
        unjudged = execute("label_dataset", env, pipeline_home)
        # The human sample is judged and committed beside the suite with its companion set.
        grade_like_a_human(made / "techdocs.synthetic.sheet.jsonl")
        for name in (
            "techdocs.synthetic.jsonl",
            "sample.json",
            "frame.json",
            "techdocs.synthetic.sheet.jsonl",
        ):
            shutil.copy(made / name, data / "suites/techdocs" / name)
        first = execute("label_dataset", env, pipeline_home)
        asked = len(fake.requests)
        again = execute("label_dataset", env, pipeline_home)
    finally:
        fake.stop()
    # Before the sample is judged, the PPI gate refuses in one line.
    assert unjudged.returncode != 0
    assert "are not the recorded random draw" in unjudged.stdout + unjudged.stderr
    assert "drawn but not judged" in unjudged.stdout + unjudged.stderr
    companion = synthetic.read_companion(made / "techdocs.synthetic.jsonl")
    assert 0 < len(companion) <= 16 and all(q.synthetic for q in companion)
    sample = load_sample(made / "sample.json")
    assert sorted(sample.frame) == sorted(q.id for q in companion) and sample.size == 4
    qrels = (storage / "labels/techdocs/llm.qrels").read_text().split("\n")
    assert any(line.startswith("syn-") for line in qrels)  # synthetic queries labelled too
    labels = [json.loads(line) for line in (storage / "labels/techdocs/labels.jsonl").open()]
    assert len([line for line in qrels if line]) == sum(r["grade"] is not None for r in labels)
    calibration = json.loads((storage / "labels/techdocs/calibration.json").read_text())
    assert calibration["pairs"] > 0 and calibration["systems"] == ["bm25", "bm25_flat"]
    assert calibration["min_kappa"] == 0.3 and calibration["usable"]
    log = first.stdout + first.stderr
    assert "weighted kappa (quadratic)" in log and "Kendall's tau of 2 system ranking(s)" in log
    # The PPI verdict: bm25_flat against bm25 on the synthetic population.
    verdict = json.loads((storage / "labels/techdocs/ppi_verdict.json").read_text())
    checks = [(c["kind"], c["measure"], c["passed"], c["message"]) for c in verdict["checks"]]
    [ndcg] = [c for c in verdict["checks"] if (c["kind"], c["measure"]) == ("baseline", "nDCG@10")]
    assert ndcg["system"] == "bm25_flat" and "PPI++ paired delta" in ndcg["message"], checks
    assert f"over {len(companion)} queries" in ndcg["message"]
    assert "PPI techdocs: " in log
    assert first.returncode == (0 if "PPI techdocs: PASS" in log else 1), log[-3000:]
    # The re-run asks the server nothing and reaches the same verdict.
    assert len(fake.requests) == asked
    assert again.returncode == first.returncode
    assert (
        json.loads((storage / "labels/techdocs/ppi_verdict.json").read_text())["checks"]
        == (verdict["checks"])
    )
