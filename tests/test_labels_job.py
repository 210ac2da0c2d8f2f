"""Issue 26 end to end: the `label_dataset` job through the real `dagster job execute` CLI on
techdocs against a loopback OpenAI-compatible server that writes queries and grades passages
from their content (tests/scripted_judge.py): synthesis, labelling, calibration, then a re-run
that asks the server nothing."""

from __future__ import annotations

import json
import subprocess

import pytest

from rageval_pipeline.core.generation import synthetic
from tests.llm_servers import FakeLLM
from tests.scripted_judge import reply
from tests.test_cli_job import BIN
from tests.test_generation_job import base_env

pytestmark = pytest.mark.slow
RUN_CONFIG = {"resources": {"labels": {"config": {"n": 16, "human_sample": 4, "depth": 3}}}}


def execute(job: str, env: dict, home) -> subprocess.CompletedProcess:
    config = home / "labels.json"
    config.write_text(json.dumps(RUN_CONFIG))
    tags = json.dumps({"dagster/partition": "techdocs"})
    command = [str(BIN / "dagster"), "job", "execute", "-m", "rageval_pipeline", "-j", job]
    return subprocess.run(
        [*command, "--tags", tags, "-c", str(config)],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_label_dataset_synthesizes_labels_and_calibrates_then_reruns_from_the_cache(
    pipeline_home,
):
    systems = {
        "bm25": {"retriever": "bm25", "chunking": {"strategy": "reference"}},
        "bm25_flat": {
            "retriever": "bm25",
            "k1": 0.3,
            "b": 0.1,
            "chunking": {"strategy": "reference"},
        },
    }
    (pipeline_home / "data" / "systems.yaml").write_text(json.dumps({"systems": systems}))
    fake = FakeLLM("openai", reply=reply).start()
    env = {
        **base_env(pipeline_home),
        "RAG_EVAL_PROVIDER": "openai",
        "RAG_EVAL_OPENAI_BASE_URL": fake.url + "/v1",
        "RAG_EVAL_OPENAI_MODEL": "fake-1",
        "RAG_EVAL_CONCURRENCY": "4",
    }
    try:
        first = execute("label_dataset", env, pipeline_home)
        asked = len(fake.requests)
        again = execute("label_dataset", env, pipeline_home)
    finally:
        fake.stop()
    assert first.returncode == 0, first.stderr[-3000:]
    assert again.returncode == 0, again.stderr[-3000:]
    assert asked > 16 and len(fake.requests) == asked  # the re-run: 0 requests
    storage = pipeline_home / "storage"
    companion = synthetic.read_companion(storage / "synthetic/techdocs/techdocs.synthetic.jsonl")
    assert 0 < len(companion) <= 16 and all(q.synthetic for q in companion)
    sample = json.loads((storage / "synthetic/techdocs/sample.json").read_text())
    assert sample["frame"] == [q.id for q in companion] and len(sample["sample"]) == 4
    qrels = (storage / "labels/techdocs/llm.qrels").read_text().split("\n")
    assert any(line.startswith("syn-") for line in qrels)  # synthetic queries labelled too
    labels = [json.loads(line) for line in (storage / "labels/techdocs/labels.jsonl").open()]
    assert len([line for line in qrels if line]) == sum(r["grade"] is not None for r in labels)
    calibration = json.loads((storage / "labels/techdocs/calibration.json").read_text())
    assert calibration["pairs"] > 0 and calibration["systems"] == ["bm25", "bm25_flat"]
    assert calibration["min_kappa"] == 0.4  # the policy's default floor
    assert calibration["usable"] == (calibration["kappa_quadratic"] >= 0.4)
    log = first.stdout + first.stderr
    assert "weighted kappa (quadratic)" in log and "Kendall's tau of 2 system ranking(s)" in log
