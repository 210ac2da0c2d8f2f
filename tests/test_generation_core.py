"""The generation core: configuration, verdict parsing, the cache, intervals and labels."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, kendalltau

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import config, correctness, labels
from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.llm import LLM
from rageval_pipeline.core.generation.providers import client_for
from rageval_pipeline.core.generation.verdicts import parse_grade, parse_verdict
from rageval_pipeline.core.io import beir
from rageval_pipeline.core.io.net import NetLimits
from rageval_pipeline.core.suites import loaders
from tests.conftest import SHARED_BEIR
from tests.llm_servers import FakeLLM, Scripted


@pytest.fixture
def ollama():
    fake = FakeLLM("ollama").start()
    yield fake
    fake.stop()


def make_llm(fake, cache_dir, **overrides) -> LLM:
    cfg = ProviderConfig(provider="ollama", base_url=fake.url, model="m", **overrides)
    return LLM(cfg, cache_dir, client=client_for(cfg, NetLimits(deadline_s=5, attempts=1)))


# --- configuration ------------------------------------------------------------------------


def test_unconfigured_environment_turns_nothing_on():
    assert not config.configured({})
    assert not config.configured({"RAGEVAL_OLLAMA_BASE_URL": "http://x"})
    assert config.configured({"RAGEVAL_PROVIDER": "ollama"})
    assert config.configured({"RAGEVAL_OLLAMA_MODEL": "llama3.1:8b"})


def test_seed_002_defaults_and_a_separate_judge():
    env = {
        "RAGEVAL_PROVIDER": "ollama",
        "RAGEVAL_OLLAMA_MODEL": "qwen2.5:7b",
        "RAGEVAL_JUDGE_PROVIDER": "anthropic",
        "RAGEVAL_ANTHROPIC_API_KEY": "sk-x",
    }
    answer, judge = config.from_env("answer", env), config.from_env("judge", env)
    assert (answer.provider, answer.model, answer.base_url) == (
        "ollama",
        "qwen2.5:7b",
        "http://localhost:11434",
    )
    assert (judge.provider, judge.model) == ("anthropic", "claude-3-5-sonnet-20241022")
    assert judge.key() == "sk-x" and judge.key_variable == "RAGEVAL_ANTHROPIC_API_KEY"
    assert answer.temperature == 0.0 and answer.seed == 42
    same = config.from_env("judge", {"RAGEVAL_OLLAMA_MODEL": "a", "RAGEVAL_JUDGE_MODEL": "b"})
    assert (same.provider, same.model) == ("ollama", "b")


def test_unknown_provider_and_bad_setting_are_clear():
    with pytest.raises(GenerationError, match="RAGEVAL_PROVIDER must be one of"):
        config.from_env("answer", {"RAGEVAL_PROVIDER": "gemini"})
    with pytest.raises(GenerationError, match="RAGEVAL_OPENAI_MODEL"):
        config.from_env("answer", {"RAGEVAL_PROVIDER": "openai"})
    with pytest.raises(GenerationError, match="RAGEVAL_TEMPERATURE"):
        config.from_env("answer", {"RAGEVAL_TEMPERATURE": "9"})


def test_key_is_never_in_repr_or_dump():
    cfg = config.from_env(
        "answer",
        {
            "RAGEVAL_PROVIDER": "openai",
            "RAGEVAL_OPENAI_MODEL": "m",
            "RAGEVAL_OPENAI_API_KEY": "sk-secret",
        },
    )
    assert "sk-secret" not in repr(cfg) and "sk-secret" not in cfg.model_dump_json()


# --- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        # Clean replies: the token alone, trimmed of whitespace, emphasis, closing punctuation.
        ("TRUE", "TRUE"),
        ("  true.\n", "TRUE"),
        ("**False.**", "FALSE"),
        ("`TRUE`", "TRUE"),
        ("_FALSE_!", "FALSE"),
        # Structured replies: exactly the one field.
        ('{"verdict": "TRUE"}', "TRUE"),
        (' {"verdict":"false"}\n', "FALSE"),
        # Negations (issue 24): a sentence around the token is never read as the token.
        ("That doesn't look TRUE to me.", "unparseable"),
        ("I can't say that it is TRUE.", "unparseable"),
        ("not true", "unparseable"),
        ("It isn't false", "unparseable"),
        ("Never TRUE", "unparseable"),
        ("Answer: TRUE", "unparseable"),
        ("FALSE - the numbers differ", "unparseable"),
        ("TRUE or FALSE", "unparseable"),
        ("TRUE?", "unparseable"),
        ('"TRUE"', "unparseable"),
        ("Yes", "unparseable"),
        ("trueish", "unparseable"),
        ("", "unparseable"),
        ("true", "TRUE"),  # JSON's `true` is read as the token, not as a JSON value
        ('{"verdict": "TRUE", "reason": "not equivalent"}', "unparseable"),
        ('{"verdict": "FALSE", "verdict": "TRUE"}', "unparseable"),  # duplicate key
        ('{"verdict": true}', "unparseable"),
        ('{"verdict": "NOT TRUE"}', "unparseable"),
        ('["TRUE"]', "unparseable"),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) == verdict


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("##final score: 2", 2),
        ("**##final score: 3**", 3),
        ("Final score: 1.", 1),
        ("3", 3),
        ('{"grade": 0}', 0),
        # The steps the relevance prompt asks for (issue 34), and nothing else around them.
        ("M: 2, T: 3\n##final score: 3", 3),
        ("M: 1\nT: 2\nO: 1\n##final score: 1", 1),
        ("M: 2\nI think so\n##final score: 2", None),
        ("M: 2\n##final score: 2\n##final score: 1", None),
        ("Score: 1.", None),
        ("1 or 2", None),
        ("5", None),
        ("1.5", None),
        ("##final score: 1 ##final score: 3", None),
        ("relevant", None),
        ('{"grade": true}', None),
        ('{"grade": 2.0}', None),
        ('{"grade": "2"}', None),
        ('{"grade": 4}', None),
        ('{"grade": 2, "grade": 3}', None),
    ],
)
def test_parse_grade(text, grade):
    assert parse_grade(text) == grade


def test_majority_and_split_votes():
    assert correctness.majority(["TRUE", "TRUE", "FALSE"]) == "TRUE"
    assert correctness.majority(["TRUE", "FALSE"]) == "unparseable"


# --- cache, dry run, samples --------------------------------------------------------------


def test_cache_makes_no_call_on_rerun(ollama, tmp_path):
    prompts = ["first question", "second question"]
    first = make_llm(ollama, tmp_path).complete_all(prompts, samples=2)
    assert len(ollama.requests) == 4
    again = make_llm(ollama, tmp_path)
    assert again.complete_all(prompts, samples=2) == first
    assert len(ollama.requests) == 4  # 0 calls on the re-run
    assert again.usage.calls == 0 and again.usage.cached == 4
    make_llm(ollama, tmp_path, temperature=0.5).complete_all(prompts[:1])
    assert len(ollama.requests) == 5  # a changed parameter is a miss
    entries = list(tmp_path.rglob("*.json"))
    assert len(entries) == 5 and not list(tmp_path.rglob("*.tmp"))
    assert json.loads(entries[0].read_text())["model"] == "m"


def test_another_server_under_the_same_model_name_is_a_miss(ollama, tmp_path):
    """A cached answer of one server is never another's: a garbage-answering server keeps
    its garbage (issue 34 found the first server's answers replayed for the second)."""
    make_llm(ollama, tmp_path).complete("a question")
    other = FakeLLM("ollama").start()
    try:
        make_llm(other, tmp_path).complete("a question")
        assert len(other.requests) == 1 and len(ollama.requests) == 1
    finally:
        other.stop()


def test_dry_run_counts_calls_and_tokens_without_calling(ollama, tmp_path):
    make_llm(ollama, tmp_path).complete("cached already")
    dry = LLM(ProviderConfig(base_url=ollama.url, model="m"), tmp_path, dry_run=True)
    dry.complete_all(["cached already", "x" * 40, "y" * 41], samples=1)
    assert len(ollama.requests) == 1
    assert (dry.usage.calls, dry.usage.cached) == (2, 1)
    assert dry.usage.input_tokens == 10 + 11 and dry.usage.output_tokens == 2 * 512


def test_concurrency_is_limited(ollama):
    ollama.delay_s = 0.3
    make_llm(ollama, None, concurrency=2).complete_all([f"q{i}" for i in range(6)])
    assert len(ollama.requests) == 6 and ollama.max_in_flight == 2


def test_usage_is_recorded(ollama, tmp_path):
    llm = make_llm(ollama, None)
    llm.complete("one two three")
    assert llm.usage.input_tokens == 3 and llm.usage.output_tokens == 8


def test_samples_report_agreement(ollama, tmp_path):
    replies = iter(["TRUE", "FALSE", "TRUE"])
    ollama.reply = lambda prompt: next(replies)
    refs = [correctness.Reference(query_id="q", query="Q?", answer="A", grade=1, targets=["d"])]
    answers = pd.DataFrame(dict(query_id=["q"], query=["Q?"], answer=["A"]))
    judged = correctness.judge_answers(make_llm(ollama, None, concurrency=1), answers, refs, 3)
    assert judged["verdict"].tolist() == ["TRUE"]
    assert judged["agreement"].iloc[0] == pytest.approx(2 / 3)
    assert json.loads(judged["raw_output"].iloc[0]) == ["TRUE", "FALSE", "TRUE"]


def wait_for(condition, limit_s: float = 10.0) -> bool:
    """Poll `condition` for up to `limit_s` (a bound on the wait, not a timing assertion)."""
    end = time.monotonic() + limit_s
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)
    return condition()


def test_the_step_deadline_cancels_calls_in_flight_and_starts_no_other(ollama):
    ollama.drip_s = 0.2  # a byte every 0.2 s: no per-attempt deadline (5 s here) would trip
    llm = make_llm(ollama, None, concurrency=2, step_deadline_s=0.5)
    with pytest.raises(GenerationError) as info:
        llm.complete_all([f"q{i}" for i in range(5)], samples=2)
    assert str(info.value) == (
        "the step's total deadline of 0.5 s (RAGEVAL_STEP_DEADLINE_S) passed with 0 of 10 "
        "call(s) answered: the calls in flight were cancelled, the rest not started"
    )
    assert len(ollama.requests) == 2  # the two in flight; the other eight never started
    assert wait_for(lambda: ollama.disconnects == 2)  # their connections were closed


def test_the_first_failure_stops_the_other_calls(ollama):
    ollama.script = [Scripted(404, b'{"error": "model not found"}')]
    ollama.delay_s = 0.2
    llm = make_llm(ollama, None, concurrency=1)
    with pytest.raises(GenerationError, match="HTTP 404: model not found"):
        llm.complete_all([f"q{i}" for i in range(5)])
    assert len(ollama.requests) == 1


def test_the_judge_asks_for_a_structured_verdict(ollama):
    refs = [correctness.Reference(query_id="q", query="Q?", answer="A", grade=1, targets=["d"])]
    answers = pd.DataFrame(dict(query_id=["q"], query=["Q?"], answer=["A"]))
    ollama.reply = lambda prompt: {"verdict": "TRUE"}
    judged = correctness.judge_answers(make_llm(ollama, None), answers, refs)
    assert judged["verdict"].tolist() == ["TRUE"]
    assert json.loads(judged["raw_output"].iloc[0]) == ['{"verdict": "TRUE"}']
    assert ollama.requests[0]["body"]["format"]["required"] == ["verdict"]


# --- correctness --------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 5), (3, 5), (5, 5), (17, 40)])
def test_wilson_interval_matches_scipy(k, n):
    expected = binomtest(k, n).proportion_ci(0.95, method="wilson")
    low, high = correctness.wilson_interval(k, n)
    assert low == pytest.approx(expected.low, abs=1e-9)
    assert high == pytest.approx(expected.high, abs=1e-9)


def test_unparseable_is_counted_and_never_true():
    judged = pd.DataFrame(
        dict(
            query_id=["a", "b", "c", "d"],
            verdict=["TRUE", "FALSE", "unparseable", "TRUE"],
            sample_verdicts=['["TRUE"]'] * 4,
            agreement=[1.0] * 4,
        )
    )
    summary = correctness.summarize(judged)
    assert (summary.n, summary.true, summary.false, summary.unparseable) == (4, 2, 1, 1)
    assert summary.rate == 0.5
    per_query = correctness.metric_rows(summary, judged)["query_metrics"]
    assert per_query["value"].tolist() == [1.0, 0.0, 0.0, 1.0]


def test_best_targets_use_the_highest_grade_present():
    qrels = pd.DataFrame(
        dict(
            query_id=["q"] * 4 + ["r"],
            doc_id=["d3", "d1", "d2", "d0", "x"],
            relevance=[1, 2, 2, 0, 0],
        )
    )
    assert correctness.best_targets(qrels, "q") == (2, ["d1", "d2"])
    with pytest.raises(ValueError, match="no relevant judgment"):
        correctness.best_targets(qrels, "r")


# --- suggested labels ---------------------------------------------------------------------


def sheet_rows(grades, systems):
    return [
        labels.SheetRow(
            query_id=f"q{i % 2}",
            query="refund policy?" if g is not None and g >= 2 else "pool?",
            target_id=f"t{i}",
            target_text=f"text {i}",
            systems=s,
            grade=g,
        )
        for i, (g, s) in enumerate(zip(grades, systems, strict=True))
    ]


def test_suggest_marks_the_model_and_never_writes_grade(ollama, tmp_path):
    rows = sheet_rows([3, None, 0, 2], [["a"], ["b"], ["a", "b"], ["b"]])
    out = labels.suggest(rows, make_llm(ollama, tmp_path))
    assert [r.grade for r in out] == [3, None, 0, 2]
    assert [r.suggested_grade for r in out] == [3, 1, 1, 3]
    assert {r.suggested_by for r in out} == {"ollama:m"}
    only = labels.suggest(rows, make_llm(ollama, tmp_path), unjudged_only=True)
    assert [r.suggested_grade is not None for r in only] == [False, True, False, False]


def test_sheet_round_trip_and_bad_line(tmp_path):
    path = tmp_path / "sheet.jsonl"
    row = dict(query_id="q", query="Q", target_id="t", target_text="T", systems="a@3 b@1", grade="")
    row["best_rank"] = 1
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "grade": 7}) + "\n")
    with pytest.raises(InputError) as info:
        labels.read_sheet(path)
    assert info.value.line == 2 and info.value.field == "grade"
    path.write_text(json.dumps(row) + "\n")
    (read,) = labels.read_sheet(path)
    assert read.ranks() == {"a": 3, "b": 1} and read.grade is None
    labels.write_sheet(tmp_path / "out.jsonl", [read])
    written = json.loads((tmp_path / "out.jsonl").read_text())
    assert written["suggested_grade"] is None and written["best_rank"] == 1
    assert written["systems"] == "a@3 b@1"


def quadratic_kappa(a, b, k=4):
    """Weighted kappa from its definition, independent of scikit-learn."""
    observed = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        observed[x, y] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    weights = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)])
    return 1 - (weights * observed).sum() / (weights * expected).sum()


def test_agreement_kappa_and_kendall_tau():
    human = [3, 2, 0, 1, 2, 0]
    llm = [3, 1, 0, 1, 3, 1]
    systems = [["a"], ["a"], ["b"], ["b", "c"], ["c"], ["c"]]
    rows = [
        r.model_copy(update={"suggested_grade": s})
        for r, s in zip(sheet_rows(human, systems), llm, strict=True)
    ]
    report = labels.agreement_with_humans(rows)
    assert report.pairs == 6
    assert report.kappa_quadratic == pytest.approx(quadratic_kappa(human, llm))
    assert report.systems == ["a", "b", "c"]
    assert report.human_scores == [2.5, 0.5, 1.5]  # no ranks: gains summed, mean of 2 queries
    expected = kendalltau(report.human_scores, report.llm_scores).statistic
    assert report.kendall_tau == pytest.approx(expected)
    assert not math.isnan(report.kendall_tau)


@pytest.mark.skipif(
    not (SHARED_BEIR / "nfcorpus.zip").exists(),
    reason="../shared/data/beir/nfcorpus.zip (official BEIR archive) is absent",
)
def test_seed_002_nfcorpus_queries_have_grade_2_targets_in_beir_test_qrels(tmp_path):
    folder = beir.extract_archive(SHARED_BEIR / "nfcorpus.zip", tmp_path, "nfcorpus")
    qrels = loaders.read_beir_qrels(folder / "qrels")
    test = qrels[qrels["split"] == "test"]
    plan = correctness.plan_ground_truth(
        loaders.read_queries(folder / "queries.jsonl"),
        test,
        correctness.GENERATION_SETS["nfcorpus"],
    )
    assert [p[2] for p in plan] == [2, 2, 2, 2, 2]  # the highest grade present, recorded
    assert [len(p[3]) for p in plan] == [5] * 5
    highly = test[test["relevance"] == 2].groupby("query_id").size()
    # Seed 002's counts of highly relevant documents: 21, 20, 16, 15, 14.
    assert highly[list(correctness.GENERATION_SETS["nfcorpus"])].tolist() == [21, 20, 16, 15, 14]


def test_each_calls_attempts_fit_inside_the_step_deadline(ollama, monkeypatch):
    """Issue 34: with the limits from the environment, a provider that drips bytes ends on
    the transport's line within the step's deadline (4 x 300 s no longer outlast 1,800 s)."""
    from rageval_pipeline.core.generation.providers import fit_in_step
    from rageval_pipeline.core.settings.limits import LLM as PREFIX
    from rageval_pipeline.core.settings.limits import LLM_DEFAULTS

    defaults = NetLimits.from_env(PREFIX, **LLM_DEFAULTS)
    config = ProviderConfig(provider="ollama", base_url=ollama.url, model="m")
    assert fit_in_step(defaults, config) == defaults  # 4 x 300 s + back-offs fit in 1,800 s
    short = config.model_copy(update={"step_deadline_s": 400.0})
    assert fit_in_step(defaults, short).deadline_s == pytest.approx(0.9 * (400 - 3.5) / 4)
    monkeypatch.setenv("RAGEVAL_LLM_ATTEMPTS", "2")
    monkeypatch.setenv("RAGEVAL_LLM_BACKOFF_S", "0")
    ollama.drip_s = 0.2
    llm = LLM(config.model_copy(update={"step_deadline_s": 2.0}), None)
    with pytest.raises(GenerationError) as info:
        llm.complete_all(["q"])
    assert str(info.value) == (
        f"ollama is unreachable or failing: {ollama.url}/api/chat: failed after 2 attempt(s): "
        "no complete response within the 0.9 s deadline (RAGEVAL_LLM_DEADLINE_S)"
    )
