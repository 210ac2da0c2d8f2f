"""`rageval suggest` against a loopback Ollama: suggestions beside human grades, agreement."""

from __future__ import annotations

import json

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.generation.config import SWITCHES
from tests.llm_servers import FakeLLM

ROWS = [  # the shape `rageval pool` writes, two of them already judged by a human
    ("q1", "refund policy", "t1", "Full refund up to 48 h before arrival.", "bm25@1", 3),
    ("q1", "refund policy", "t2", "The pool opens at 7.", "bm25@2 dense@1", 0),
    ("q1", "refund policy", "t3", "Cancellation fees for groups.", "dense@2", ""),
]

ROWS_TEXT = {row[2]: row[3] for row in ROWS}


@pytest.fixture
def ollama(tmp_path, monkeypatch):
    fake = FakeLLM("ollama").start()
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGEVAL_JUDGE_PROVIDER", "ollama")
    monkeypatch.setenv("RAGEVAL_OLLAMA_BASE_URL", fake.url)
    monkeypatch.setenv("RAGEVAL_JUDGE_MODEL", "judge:1")
    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "storage"))
    yield fake
    fake.stop()


def write_sheet(path, rows=ROWS):
    keys = ("query_id", "query", "target_id", "target_text", "systems", "grade")
    lines = [json.dumps({**dict(zip(keys, r, strict=True)), "best_rank": 1}) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def test_suggest_writes_suggestions_and_reports_agreement(ollama, tmp_path, capsys):
    sheet, out = tmp_path / "pool.jsonl", tmp_path / "suggested.jsonl"
    write_sheet(sheet)
    storage = ["--storage", str(tmp_path / "storage")]
    assert main(["suggest", str(sheet), "--output", str(out), "--dry-run", *storage]) == 0
    assert ollama.requests == [] and not out.exists()
    assert "would make 3 call(s)" in capsys.readouterr().out

    assert main(["suggest", str(sheet), "--output", str(out), *storage]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["grade"] for r in rows] == [3, 0, None]  # human grades untouched
    # The fake judge grades 3 when the prompt mentions "refund" (every row here), else 1.
    assert [r["suggested_grade"] for r in rows] == [3, 3, 3]
    assert {r["suggested_by"] for r in rows} == {"ollama:judge:1"}
    assert rows[0]["best_rank"] == 1 and rows[1]["systems"] == "bm25@2 dense@1"
    printed = capsys.readouterr().out
    assert "3 suggestion(s), 0 unparseable" in printed
    assert "weighted kappa (quadratic) 0.000" in printed  # one grade suggested for all: chance

    assert main(["suggest", str(sheet), "--output", str(out), *storage]) == 0
    assert len(ollama.requests) == 3  # cached: the re-run makes no call


def test_bad_sheet_is_one_line_naming_file_line_and_field(ollama, tmp_path, capsys):
    sheet = tmp_path / "pool.jsonl"
    write_sheet(sheet, [*ROWS[:1], (*ROWS[1][:5], 9)])
    assert main(["suggest", str(sheet), "--output", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {sheet}:2: grade:") and "\n" not in err
    assert ollama.requests == []


def test_only_a_clean_grade_is_a_suggestion(ollama, tmp_path, capsys):
    replies = {"t1": "##final score: 3", "t2": "M: 2, T: 3\n##final score: 3", "t3": "1 or 2"}
    ollama.reply = lambda prompt: next(v for k, v in replies.items() if ROWS_TEXT[k] in prompt)
    sheet, out = tmp_path / "pool.jsonl", tmp_path / "suggested.jsonl"
    write_sheet(sheet)
    assert main(["suggest", str(sheet), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # t2 is the reply the prompt asks for (its steps, then the final score): read (issue 34).
    assert [r["suggested_grade"] for r in rows] == [3, 3, None]
    assert "3 suggestion(s), 1 unparseable" in capsys.readouterr().out


def test_suggest_ends_at_the_step_deadline(ollama, tmp_path, monkeypatch, capsys):
    ollama.drip_s = 0.2  # one byte every 0.2 s: each call would take minutes
    monkeypatch.setenv("RAGEVAL_STEP_DEADLINE_S", "0.5")
    sheet, out = tmp_path / "pool.jsonl", tmp_path / "suggested.jsonl"
    write_sheet(sheet)
    assert main(["suggest", str(sheet), "--output", str(out)]) == 1
    assert capsys.readouterr().err == (
        "error: the step's total deadline of 0.5 s (RAGEVAL_STEP_DEADLINE_S) passed with 0 "
        "of 3 call(s) answered: the calls in flight were cancelled, the rest not started\n"
    )
    assert len(ollama.requests) == 2 and not out.exists()  # concurrency 2: the third never sent
