"""The generation group through `dagster.materialize` against a loopback Ollama: off until a
provider is configured, AnswerCorrectness in DuckDB, the cache, the dry run."""

from __future__ import annotations

import json

import dagster as dg
import pandas as pd
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import correctness
from rageval_pipeline.core.generation.config import SWITCHES
from rageval_pipeline.core.storage.warehouse import Warehouse
from rageval_pipeline.defs.assets import generation
from rageval_pipeline.defs.assets.generation import GenerationSettings
from rageval_pipeline.defs.definitions import build_definitions
from tests.llm_servers import FakeLLM, default_reply

PARTITION = "beir-mini"  # generation set q01, q02
# The LLM-label group (issue 26, tests/test_labels_job.py) is on with a provider too.
RETRIEVAL = dg.AssetSelection.all() - dg.AssetSelection.groups("generation", "llm_labels")
GENERATION = dg.AssetSelection.groups("generation")


def judge_reply(prompt: str) -> str:
    """TRUE for q01; for q02 a negated TRUE (issue 24), which must be unparseable."""
    if "Respond with only: TRUE or FALSE" in prompt:
        if "how to descale espresso machine" in prompt:
            return "TRUE."
        return "That doesn't look TRUE to me."
    return default_reply(prompt)


@pytest.fixture
def ollama(pipeline_home, monkeypatch):
    fake = FakeLLM("ollama", reply=judge_reply).start()
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGEVAL_PROVIDER", "ollama")
    monkeypatch.setenv("RAGEVAL_OLLAMA_BASE_URL", fake.url)
    monkeypatch.setenv("RAGEVAL_OLLAMA_MODEL", "fake:1")
    yield fake
    fake.stop()


def materialize(defs, selection, **resources):
    return dg.materialize(
        list(defs.assets),
        selection=selection,
        partition_key=PARTITION,
        resources={**defs.resources, **resources},
        raise_on_error=False,
    )


def selected(defs: dg.Definitions, job: str) -> set[str]:
    keys = defs.resolve_job_def(job).asset_layer.selected_asset_keys
    return {k.to_user_string() for k in keys}


def test_off_without_a_provider_and_retrieval_jobs_unchanged(pipeline_home, monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    plain = build_definitions()
    names = [j.name for j in plain.jobs]
    assert "evaluate_generation" not in names
    assert not any("answer" in key or key == "ground_truth" for key in selected(plain, names[0]))
    monkeypatch.setenv("RAGEVAL_OLLAMA_MODEL", "llama3.1:8b")
    on = build_definitions()
    assert sorted(j.name for j in on.jobs) == sorted(
        [*names, "evaluate_generation", "label_dataset"]
    )
    for job in names:  # every retrieval job selects exactly what it did
        assert selected(on, job) == selected(plain, job)
    assert selected(on, "evaluate_generation") == {
        "ground_truth",
        "bm25/answers",
        "bm25/answer_judgments",
    }
    versions = {
        key.to_user_string(): version
        for asset in on.assets
        for key, version in asset.code_versions_by_key.items()
    }
    expected = generation.code_versions()
    assert versions["ground_truth"] == expected["ground_truth"]
    assert versions["bm25/answers"] == expected["answers"]
    assert versions["bm25/answer_judgments"] == expected["answer_judgments"]


def test_code_versions_follow_model_prompts_and_format(monkeypatch):
    base = {"RAGEVAL_PROVIDER": "ollama", "RAGEVAL_OLLAMA_MODEL": "m:1"}
    first = generation.code_versions(base)
    assert len(set(first.values())) == 3  # each asset sends its own prompt
    assert generation.code_versions(base) == first
    assert generation.code_versions(base | {"RAGEVAL_OLLAMA_API_KEY": "k"}) == first
    other_model = generation.code_versions(base | {"RAGEVAL_OLLAMA_MODEL": "m:2"})
    assert all(other_model[k] != first[k] for k in first)
    other_judge = generation.code_versions(base | {"RAGEVAL_JUDGE_MODEL": "j:1"})
    assert other_judge["answer_judgments"] != first["answer_judgments"]
    assert {k: other_judge[k] for k in ("ground_truth", "answers")} == {
        k: first[k] for k in ("ground_truth", "answers")
    }
    assert generation.code_versions(base | {"RAGEVAL_TEMPERATURE": "0.7"}) != first
    constants = ((generation.prompts, "PROMPT_VERSION"), (generation, "FORMAT_VERSION"))
    for module, constant in constants:
        with monkeypatch.context() as patched:
            patched.setattr(module, constant, "next")
            assert all(v != first[k] for k, v in generation.code_versions(base).items())


def test_generation_end_to_end_cached_and_dry(ollama, pipeline_home):
    defs = build_definitions()
    assert materialize(defs, RETRIEVAL).success
    result = materialize(defs, GENERATION)
    assert result.success
    assert len(ollama.requests) == 2 + 2 + 2  # references, answers, judgments

    storage = pipeline_home / "storage"
    run_id = pd.read_parquet(storage / "assets/bm25/metrics/beir-mini.parquet")["run_id"].iloc[0]
    rows = Warehouse(storage / "rageval.duckdb").query(
        "SELECT measure, value, ci_low, ci_high FROM run_metrics "
        "WHERE run_id = ? AND measure LIKE 'Answer%'",
        [run_id],
    )
    # 1 TRUE, 1 unparseable (never TRUE); the interval in the columns every measure uses.
    low, high = correctness.wilson_interval(1, 2)
    assert rows.values.tolist() == [["AnswerCorrectness", 0.5, low, high]]

    judged = pd.read_parquet(storage / "assets/bm25/answer_judgments/beir-mini.parquet")
    assert judged["verdict"].tolist() == ["TRUE", "unparseable"]
    assert json.loads(judged["raw_output"].iloc[1]) == ["That doesn't look TRUE to me."]
    (truth_file,) = (storage / "ground_truth" / PARTITION).glob("*.json")
    truth = json.loads(truth_file.read_text())
    assert truth["model"] == "fake:1" and [r["grade"] for r in truth["references"]] == [3, 3]
    assert truth["references"][0]["targets"] == ["c01"]
    answers = pd.read_parquet(storage / "assets/bm25/answers/beir-mini.parquet")
    assert all(json.loads(c) for c in answers["context_ids"])  # answered from retrieved context
    no_context = result.asset_materializations_for_node("bm25__answers")[0].metadata
    assert no_context["no_context"].value == 0
    meta = result.asset_materializations_for_node("bm25__answer_judgments")[0].metadata
    assert meta["unparseable"].value == 1 and meta["llm_calls"].value == 2

    again = materialize(defs, GENERATION)  # the cache: a re-run makes no call
    assert again.success and len(ollama.requests) == 6
    meta = again.asset_materializations_for_node("bm25__answer_judgments")[0].metadata
    assert meta["llm_calls"].value == 0 and meta["llm_cached"].value == 2

    dry = materialize(defs, GENERATION, generation=GenerationSettings(dry_run=True, samples=3))
    assert dry.success and len(ollama.requests) == 6  # counted, not called
    meta = dry.asset_materializations_for_node("bm25__answer_judgments")[0].metadata
    assert meta["llm_dry_run"].value is True
    assert meta["llm_calls"].value == 2 * 2  # samples 1 and 2 are not cached; 0 is
    after = Warehouse(storage / "rageval.duckdb").query(
        "SELECT value FROM run_metrics WHERE run_id = ? AND measure = 'AnswerCorrectness'",
        [run_id],
    )
    assert after["value"].tolist() == [0.5]  # a dry run records nothing


def test_default_sets_are_checked_against_the_suites_when_definitions_load(ollama, pipeline_home):
    suite = pipeline_home / "data" / "suites" / "techdocs" / "suite.json"
    data = json.loads(suite.read_text())
    data["queries"] = [q for q in data["queries"] if q["id"] != "Q006"]
    suite.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        build_definitions()
    assert str(info.value) == (
        f"{suite}: query Q006 of the default generation set of techdocs "
        "(core/generation/correctness.py) is not in this dataset"
    )


def test_a_configured_set_naming_an_unknown_query_fails_the_step_in_one_line(ollama):
    defs = build_definitions()
    assert materialize(defs, RETRIEVAL).success
    wrong = GenerationSettings(queries=["q01", "q404"])
    result = materialize(defs, dg.AssetSelection.assets("ground_truth"), generation=wrong)
    assert not result.success and ollama.requests == []
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    folder = build_definitions().resources["settings"].data / "suites" / PARTITION
    assert error.message.strip() == (
        f"dagster._core.definitions.events.Failure: {folder / 'queries.jsonl'}: query q404 of "
        "resources.generation.config.queries is not in this dataset"
    )
    assert error.cause is None and error.context is None  # no chained trace
