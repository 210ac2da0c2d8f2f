"""`rageval synth` and `rageval label` on techdocs against a loopback OpenAI-compatible server
whose replies follow from the prompt's content (tests/scripted_judge.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation.agreement import kappa
from rageval_pipeline.core.generation import prompts, synthetic
from rageval_pipeline.core.generation.llm import prompt_hash
from rageval_pipeline.core.statistics.sampling import load_sample
from rageval_pipeline.core.suites.golden import load_suite
from tests.conftest import REPO
from tests.scripted_judge import grade_like_a_human, reply, serve

SUITE = REPO / "data" / "suites" / "techdocs"


@pytest.fixture
def judge(tmp_path, monkeypatch):
    fake = serve(monkeypatch)
    monkeypatch.setenv("RAGEVAL_CONCURRENCY", "4")
    monkeypatch.delenv("RAGEVAL_SECOND_JUDGE_MODEL", raising=False)
    yield fake
    fake.stop()


def _systems(tmp_path):
    """Two BM25 variants, so that the calibration has two system rankings to compare."""
    path = tmp_path / "systems.yaml"
    reference = {"chunking": {"strategy": "reference"}, "retriever": "bm25"}
    systems = {"bm25": reference, "bm25_flat": {**reference, "k1": 0.3, "b": 0.1}}
    path.write_text(json.dumps({"systems": systems}))
    return ["--systems", str(path), "--storage", str(tmp_path / "storage")]


def _synth(tmp_path, capsys, *extra):
    out = tmp_path / "synthetic"
    args = ["synth", str(SUITE), "--n", "24", "--human-sample-size", "5", "--depth", "3"]
    assert main([*args, "--output", str(out), *_systems(tmp_path), *extra]) == 0
    return out, capsys.readouterr().out


def test_synth_writes_a_marked_companion_set_a_recorded_sample_and_its_sheet(
    judge, tmp_path, capsys
):
    before = hashlib.sha256((SUITE / "suite.json").read_bytes()).hexdigest()
    out, printed = _synth(tmp_path, capsys)
    assert len(judge.requests) == 24
    rows = synthetic.read_companion(out / "techdocs.synthetic.jsonl")
    assert 0 < len(rows) <= 24 and f"{len(rows)} synthetic queries kept of 24" in printed
    suite = load_suite(SUITE)
    chunks = {u.target_id: u.text for u in synthetic.units(suite)}
    for row in rows:
        assert row.synthetic and row.model == "openai:fake-1"
        assert row.prompt_hash == prompt_hash(prompts.SYNTHETIC_QUERY)
        assert row.query == reply(prompts.SYNTHETIC_QUERY.format(passage=chunks[row.source_id]))
        assert row.round_trip and max(row.round_trip.values()) <= 20
    # The suite's own file is untouched: the companion set lives beside it.
    assert hashlib.sha256((SUITE / "suite.json").read_bytes()).hexdigest() == before
    sample = load_sample(out / "sample.json")  # the record the PPI gate checks
    assert sorted(sample.frame) == sorted(r.id for r in rows) and sample.size == 5
    sheet = [json.loads(line) for line in (out / "techdocs.synthetic.sheet.jsonl").open()]
    assert {r["query_id"] for r in sheet} == set(sample.drawn())
    assert all(r["grade"] == "" and r["best_rank"] <= 3 for r in sheet)
    # Same input, same output, and every reply from the cache.
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    _synth(tmp_path, capsys)
    assert len(judge.requests) == 24
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    # The human sample's seed is the kept queries' commitment, not --seed (the passage draw's):
    # the same kept queries give the same sample whatever --seed says.
    _synth(tmp_path, capsys, "--seed", "1")
    again = load_sample(out / "sample.json")
    assert again.frame != sample.frame or again.drawn() == sample.drawn()


def test_a_reply_is_a_query_only_when_it_is_one_clean_line():
    assert synthetic.parse_query("  how do I rotate keys?  ") == "how do I rotate keys?"
    assert synthetic.parse_query("Query: rotate keys\nThis asks about keys.") is None
    assert synthetic.parse_query("12345") is None
    assert synthetic.parse_query("x" * 301) is None


def test_near_duplicates_of_suite_queries_and_of_each_other_are_dropped():
    suite = load_suite(SUITE)
    unit = synthetic.units(suite)[0]
    human = suite.queries[0].query
    rows = [
        ("syn-1", human.upper() + "!", unit, 0),  # the suite's query, shouted
        ("syn-2", "how to rotate an api key safely", unit, 0),
        ("syn-3", "how to rotate an api key safely?", unit, 0),  # same tokens
        ("syn-4", "how to safely rotate the api key", unit, 0),  # Jaccard 6/8 = 0.75: kept
    ]
    assert [r[0] for r in synthetic.without_duplicates(suite, rows)] == ["syn-2", "syn-4"]


def _label(tmp_path, *extra):
    args = [
        "label",
        str(SUITE),
        "--synthetic",
        str(tmp_path / "synthetic/techdocs.synthetic.jsonl"),
    ]
    return main(
        [*args, "--depth", "3", "--output", str(tmp_path / "labels"), *_systems(tmp_path), *extra]
    )


def test_label_dry_run_labels_calibration_and_the_cache(judge, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAGEVAL_SECOND_JUDGE_MODEL", "fake-2")
    _synth(tmp_path, capsys)
    synthesized = len(judge.requests)
    assert _label(tmp_path, "--dry-run", "--price-in", "3", "--price-out", "15") == 0
    dry = capsys.readouterr().out
    assert len(judge.requests) == synthesized and not (tmp_path / "labels").exists()
    first, second = (int(part.split(" ")[0]) for part in dry.split("would make ")[1:])
    assert "second judge: would make" in dry
    calls = first + second
    tokens_in = int(dry.split("tokens in ")[1].split(",")[0])
    tokens_out = int(dry.split("out ")[1].split(";")[0])
    assert f"estimated cost {(tokens_in * 3 + tokens_out * 15) / 1e6:.4f}" in dry

    gate = tmp_path / "gate.yaml"
    gate.write_text("version: 1\ndatasets:\n  default:\n    calibration: {min_kappa: 0.99}\n")
    sheet = tmp_path / "synthetic/techdocs.synthetic.sheet.jsonl"
    grade_like_a_human(sheet)  # the random sample, judged
    assert _label(tmp_path, "--policy", str(gate), "--human", str(sheet)) == 0
    printed = capsys.readouterr()
    assert len(judge.requests) == synthesized + calls
    labels = [json.loads(line) for line in (tmp_path / "labels/labels.jsonl").open()]
    qrels = [line.split() for line in (tmp_path / "labels/llm.qrels").read_text().splitlines()]
    # "webhook" queries get prose around their grade: unlabeled, and absent from the qrels.
    unparseable = [r for r in labels if r["grade"] is None]
    assert unparseable and all(
        "webhook" in r["raw"] or r["raw"].startswith("I would") for r in unparseable
    )
    assert f"{len(labels)} label(s), {len(unparseable)} unparseable" in printed.out
    parsed = {(r["query_id"], r["target_id"]): r["grade"] for r in labels if r["grade"] is not None}
    assert {(q, t): int(g) for q, zero, t, g in qrels} == parsed
    assert all(len(row) == 4 and row[1] == "0" for row in qrels)
    assert {r["synthetic"] for r in labels} == {True, False}
    # Calibration against the suite's human grades, recomputed here from the labels.
    suite = load_suite(SUITE)
    judged = {(r["query_id"], r["target_id"]): r["grade"] for r in map(json.loads, sheet.open())}
    sample_qrels = (tmp_path / "labels/human.qrels").read_text().splitlines()
    assert {(q, t): int(g) for q, _, t, g in map(str.split, sample_qrels)} == judged
    human = {(q.id, t): g for q in suite.queries for t, g in q.qrels} | judged
    both = [(human[k], g) for k, g in parsed.items() if k in human]
    calibration = json.loads((tmp_path / "labels/calibration.json").read_text())
    assert calibration["kappa_quadratic"] == pytest.approx(
        kappa([a for a, _ in both], [b for _, b in both], "quadratic"), abs=1e-12
    )
    assert sum(map(sum, calibration["confusion"])) == len(both)
    assert calibration["systems"] == ["bm25", "bm25_flat"]
    assert calibration["kendall_tau"] in (-1.0, 1.0)
    checks = {c["name"]: c for c in calibration["checks"]}
    assert list(checks) == ["presentation:title", "presentation:truncated", "second_judge"]
    # The scripted judge grades from content alone: another model name, the same grades.
    assert checks["second_judge"]["judge"] == "openai:fake-2"
    assert checks["second_judge"]["same"] == 1.0 and checks["second_judge"]["pairs"] > 0
    assert any(r["body"]["model"] == "fake-2" for r in judge.requests)
    assert calibration["usable"] is False
    assert "refused for gating" in printed.err and "below calibration.min_kappa 0.99" in printed.err
    # A re-run asks nothing: every label comes from the cache.
    assert _label(tmp_path, "--policy", str(gate), "--human", str(sheet)) == 0
    assert len(judge.requests) == synthesized + calls
    rerun = capsys.readouterr().out
    assert f"made 0 call(s), {first} cached" in rerun
    assert f"second judge: made 0 call(s), {second} cached" in rerun


def test_round_trip_keeps_only_queries_whose_source_comes_back_in_the_top_20(judge):
    import pandas as pd

    from rageval_pipeline.core.generation import config
    from rageval_pipeline.core.generation.llm import LLM

    unit = synthetic.Unit(target_id="doc:chunk:1", text="passage")
    rows = [("syn-1", "found", unit, 0), ("syn-2", "too deep", unit, 0), ("syn-3", "lost", unit, 0)]
    ranks = pd.DataFrame(
        [
            ("syn-1", "doc:chunk:1", "bm25", 20),
            ("syn-1", "doc:chunk:1", "dense", 2),
            ("syn-2", "doc:chunk:1", "bm25", 21),
            ("syn-3", "doc:chunk:2", "bm25", 1),
        ],
        columns=["query_id", "target_id", "system", "rank"],
    )
    kept = synthetic.round_trip(rows, ranks, LLM(config.from_env("judge"), None))
    assert [(q.id, q.round_trip) for q in kept] == [("syn-1", {"bm25": 20, "dense": 2})]


def test_bad_input_is_one_line(judge, tmp_path, capsys):
    bad = tmp_path / "techdocs.synthetic.jsonl"
    row = dict(id="syn-1", query="ok", source_id="a", model="m", prompt_hash="h", sample=0)
    bad.write_text(
        json.dumps({**row, "round_trip": {}})
        + "\n"
        + json.dumps({**row, "id": "syn-2", "synthetic": False, "round_trip": {}})
        + "\n"
    )
    args = ["label", str(SUITE), "--synthetic", str(bad), "--dry-run", *_systems(tmp_path)]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == f"error: {bad}:2: synthetic: Input should be True"
    out = tmp_path / "synthetic"
    args = ["synth", str(SUITE), "--n", "3", "--human-sample-size", "5", "--output", str(out)]
    assert main([*args, *_systems(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    # Why so few were kept, by count, then why the sample cannot be drawn.
    assert err.startswith("error: 3 synthetic queries kept of 3 drawn (0 unparseable, ")
    assert "; a human sample of 5 from 3 kept" in err and "\n" not in err
    assert not out.exists()  # refused before anything was written


def test_synth_dry_run_counts_and_writes_nothing(judge, tmp_path, capsys):
    out = tmp_path / "synthetic"
    args = ["synth", str(SUITE), "--n", "30", "--dry-run", "--price-in", "1", "--output", str(out)]
    assert main([*args, *_systems(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert judge.requests == [] and not out.exists()
    assert printed.startswith("would make 30 call(s), 0 cached; tokens in ")


def _umbrela(prompt: str) -> str:
    """The reply the relevance prompt asks for: step scores, then `##final score: g`."""
    grade = reply(prompt)["grade"] if "webhook" not in prompt.lower() else 1
    return f"M: {grade}\nT: 3\n##final score: {grade}"


@pytest.mark.parametrize(
    ("answer", "status"), [(_umbrela, 0), (lambda prompt: "Relevant, I think.", 1)]
)
def test_label_reads_its_prompts_format_and_fails_on_garbage(
    judge, tmp_path, capsys, monkeypatch, answer, status
):
    """Issue 34: a judge answering exactly as the prompt asks is read (0 unparseable); one
    answering garbage ends with exit 1 and the count, and kappa is undefined, not "below"."""
    judge.reply = answer
    monkeypatch.setenv("RAGEVAL_STRUCTURED", "off")
    monkeypatch.setenv("RAGEVAL_PRICE_IN", "0.5")
    monkeypatch.setenv("RAGEVAL_PRICE_CURRENCY", "EUR")
    args = ["label", str(SUITE), "--depth", "2", "--check-sample", "5"]
    assert main([*args, "--output", str(tmp_path / "labels"), *_systems(tmp_path)]) == status
    printed = capsys.readouterr()
    labels = [json.loads(line) for line in (tmp_path / "labels/labels.jsonl").open()]
    tokens_in = int(printed.out.split("tokens in ")[1].split(",")[0])
    assert f"estimated cost {tokens_in * 0.5 / 1e6:.4f} EUR (openai:fake-1; 0.5 in, 0 out " in (
        printed.out
    )
    assert "per million tokens, from $RAGEVAL_PRICE_IN/_OUT)" in printed.out
    if status == 0:
        assert f"{len(labels)} label(s), 0 unparseable" in printed.out
        assert all(lab["grade"] is not None for lab in labels)
        return
    assert f"{len(labels)} label(s), {len(labels)} unparseable" in printed.out
    assert printed.err.splitlines()[-1] == (
        f"error: {len(labels)} of {len(labels)} label(s) unparseable (100%), above "
        "$RAGEVAL_MAX_UNPARSEABLE 10%: the judge does not answer in the prompt's format "
        f"(raw replies in {tmp_path / 'labels'})"
    )
    assert "weighted kappa with human grades is undefined on 0 pair(s)" in printed.err
    assert "below" not in printed.err
