"""The generation group through the real `dagster job execute` CLI against loopback providers
(the retrieval run it reads materialized in-process first), and the key never reaching output,
the Dagster event log or storage."""

from __future__ import annotations

import os

import pytest

from rageval_pipeline.core.generation.config import SWITCHES
from rageval_pipeline.core.generation.correctness import wilson_interval
from rageval_pipeline.core.storage.warehouse import Warehouse
from tests.jobs import dagster_execute, materialize_job
from tests.llm_servers import FakeLLM, Scripted
from tests.test_generation_pipeline import judge_reply

pytestmark = pytest.mark.slow
PARTITION = "beir-mini"


def base_env(home) -> dict:
    (home / "dagster_home").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    return {**env, "DAGSTER_HOME": str(home / "dagster_home")}


def retrieved(monkeypatch: pytest.MonkeyPatch, env: dict, partition: str) -> bool:
    """evaluate_bm25 materialized in this process with `env`'s generation settings (the
    generation job that reads its run is the CLI's): whether it succeeded."""
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        if name.startswith("RAGEVAL_"):
            monkeypatch.setenv(name, value)
    return materialize_job("evaluate_bm25", partition).success


def test_evaluate_generation_puts_answer_correctness_in_duckdb(pipeline_home, monkeypatch):
    fake = FakeLLM("ollama", reply=judge_reply).start()
    env = {
        **base_env(pipeline_home),
        "RAGEVAL_PROVIDER": "ollama",
        "RAGEVAL_OLLAMA_BASE_URL": fake.url,
        "RAGEVAL_OLLAMA_MODEL": "fake:1",
    }
    try:
        assert retrieved(monkeypatch, env, PARTITION)
        assert fake.requests == []  # retrieval jobs make no LLM call
        generation = dagster_execute("evaluate_generation", PARTITION, env, pipeline_home)
        assert generation.returncode == 0, generation.stderr[-2000:]
    finally:
        fake.stop()
    assert len(fake.requests) == 6
    rows = Warehouse(pipeline_home / "storage" / "rageval.duckdb").query(
        "SELECT r.system, m.value FROM run_metrics m JOIN runs r USING (run_id) "
        "WHERE m.measure = 'AnswerCorrectness'"
    )
    assert rows.values.tolist() == [["bm25", 0.5]]
    assert "AnswerCorrectness=0.500" in generation.stderr + generation.stdout


def _files_containing(root, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_keys_never_reach_output_event_log_or_storage(pipeline_home, monkeypatch):
    fake = FakeLLM("anthropic").start()
    secret = "sk-ant-SECRET-4242"
    env = {
        **base_env(pipeline_home),
        "RAGEVAL_PROVIDER": "anthropic",
        "RAGEVAL_ANTHROPIC_BASE_URL": fake.url,
        "RAGEVAL_ANTHROPIC_MODEL": "claude-fake",
    }
    outputs = []

    def generate(key: str):
        env_key = {**env, "RAGEVAL_ANTHROPIC_API_KEY": key}
        outputs.append(dagster_execute("evaluate_generation", PARTITION, env_key, pipeline_home))
        return outputs[-1]

    try:
        assert retrieved(monkeypatch, env, PARTITION)
        # One malformed key through the CLI; the other shapes are refused in-process in
        # test_generation_providers.py.
        bad = generate(f"{secret}\n")
        assert bad.returncode != 0
        assert "RAGEVAL_ANTHROPIC_API_KEY is malformed" in bad.stdout + bad.stderr
        assert fake.requests == []  # a malformed key is refused before any request
        # A valid key the provider refuses, with its error echoing the key back.
        echo = f'{{"type": "error", "error": {{"message": "invalid x-api-key {secret}"}}}}'
        fake.script = [Scripted(401, echo.encode())]
        refused = generate(secret)
        assert refused.returncode != 0
        assert "RAGEVAL_ANTHROPIC_API_KEY was refused" in refused.stdout + refused.stderr
        good = generate(secret)
        assert good.returncode == 0, good.stderr[-2000:]
    finally:
        fake.stop()
    assert fake.requests[-1]["headers"]["x-api-key"] == secret  # it was really used
    for run in outputs:
        assert "SECRET" not in run.stdout + run.stderr
    # The event log did record the failures (so the search below is not vacuous)...
    assert _files_containing(pipeline_home / "dagster_home", b"API_KEY is malformed")
    assert _files_containing(pipeline_home / "dagster_home", b"was refused")
    # ...and holds the key nowhere, nor does anything the pipeline stored.
    assert _files_containing(pipeline_home / "dagster_home", b"SECRET") == []
    assert _files_containing(pipeline_home / "storage", b"SECRET") == []


def test_the_default_generation_check_on_techdocs_with_a_step_deadline(pipeline_home, monkeypatch):
    """Issue 24: the default configuration on the default suite, end to end (it stopped at
    Q008), over an OpenAI-compatible server; first one that drips bytes past the deadline."""
    fake = FakeLLM("openai").start()  # the default replies: structured verdicts, all TRUE
    env = {
        **base_env(pipeline_home),
        "RAGEVAL_PROVIDER": "openai",
        "RAGEVAL_OPENAI_BASE_URL": fake.url + "/v1",
        "RAGEVAL_OPENAI_MODEL": "fake-1",
    }
    try:
        assert retrieved(monkeypatch, env, "techdocs")
        fake.drip_s = 0.5
        late = {**env, "RAGEVAL_STEP_DEADLINE_S": "1"}
        stopped = dagster_execute("evaluate_generation", "techdocs", late, pipeline_home)
        fake.drip_s = 0
        done = dagster_execute("evaluate_generation", "techdocs", env, pipeline_home)
    finally:
        fake.stop()
    assert stopped.returncode != 0
    assert (
        "the step's total deadline of 1 s (RAGEVAL_STEP_DEADLINE_S) passed with 0 of 5 call(s) "
        "answered: the calls in flight were cancelled, the rest not started"
    ) in stopped.stdout + stopped.stderr
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(fake.requests) == 2 + 3 * 5  # two cut by the deadline; references, answers, verdicts
    asked = fake.requests[-1]["body"]["response_format"]
    assert asked["type"] == "json_schema" and asked["json_schema"]["name"] == "record_verdict"
    rows = Warehouse(pipeline_home / "storage" / "rageval.duckdb").query(
        "SELECT m.measure, m.value, m.ci_low, m.ci_high FROM run_metrics m JOIN runs r "
        "USING (run_id) WHERE r.dataset = 'techdocs' AND m.measure LIKE 'Answer%'"
    )
    low, high = wilson_interval(5, 5)
    assert rows.values.tolist() == [["AnswerCorrectness", 1.0, low, high]]
