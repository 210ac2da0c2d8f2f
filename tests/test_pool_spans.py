"""The judging workflow on a suite judged by spans: `rageval pool` sheets carry each chunk's
offsets, `rageval suggest` keeps them, and `rageval pool merge` stores a grade as a span."""

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation import pool
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import suite_tables
from tests.test_generation_cli import ollama  # noqa: F401 (the loopback judge fixture)

FIXTURES = Path(__file__).parent / "fixtures" / "pool"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def suite_dir(tmp_path: Path, capsys) -> Path:
    """The pool suite, converted to spans by the CLI."""
    folder = Path(shutil.copytree(FIXTURES / "poolsuite", tmp_path / "poolsuite"))
    assert main(["spans", "convert", str(folder)]) == 0
    capsys.readouterr()
    return folder


@pytest.fixture
def sheet(suite_dir: Path, tmp_path: Path, capsys) -> Path:
    path = tmp_path / "pool.jsonl"
    argv = [
        "pool",
        "export",
        str(suite_dir),
        "--systems",
        str(FIXTURES / "systems.yaml"),
        "--no-extra",
    ]
    assert main([*argv, "-o", str(path)]) == 0
    capsys.readouterr()
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _text(suite_dir: Path, doc_id: str) -> str:
    raw = json.loads((suite_dir / "suite.json").read_text())
    return next(d["content"] for d in raw["documents"] if d["id"] == doc_id)


def test_the_sheet_carries_each_chunks_offsets_in_its_document(suite_dir, sheet):
    rows = _rows(sheet)
    assert [(r["target_id"], r["doc_id"], r["start"], r["end"]) for r in rows] == [
        ("tokens:chunk:0", "tokens", 0, 32),
        ("tokens:chunk:2", "tokens", 111, 197),
        ("limits:chunk:0", "limits", 0, 59),
    ]
    for row in rows:  # the offsets are the chunk the judge reads
        assert _text(suite_dir, row["doc_id"])[row["start"] : row["end"]] == row["target_text"]


def test_suggested_labels_keep_the_span_they_grade(ollama, sheet, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "suggested.jsonl"
    assert main(["suggest", str(sheet), "--output", str(out), "--storage", str(tmp_path)]) == 0
    suggested = _rows(out)
    assert [r["suggested_grade"] for r in suggested] == [1, 1, 1]
    spans = ("target_id", "doc_id", "start", "end")
    assert [[r[k] for k in spans] for r in suggested] == [
        [r[k] for k in spans] for r in _rows(sheet)
    ]


def test_a_merged_grade_is_stored_as_a_span(suite_dir, sheet, capsys):
    rows = _rows(sheet)
    rows[1]["grade"] = 2  # tokens:chunk:2 for Q1
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 0
    assert "1 added" in capsys.readouterr().out
    raw = json.loads((suite_dir / "suite.json").read_text())
    text = _text(suite_dir, "tokens")
    assert raw["queries"][0]["spans"][-1] == {
        "doc": "tokens",
        "start": 111,
        "end": 197,
        "grade": 2,
        "sha256": hashlib.sha256(text[111:197].encode("utf-8")).hexdigest(),
    }
    qrels = suite_tables(load_suite(suite_dir)).qrels
    assert ("Q1", "tokens:chunk:2", 2) in set(
        zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"], strict=True)
    )


def test_a_sheet_row_whose_chunk_moved_is_refused(suite_dir, sheet, capsys):
    path = suite_dir / "suite.json"
    raw = json.loads(path.read_text())
    raw["documents"][0]["content"] = raw["documents"][0]["content"].replace(
        "How access tokens work.", "How access tokens work, and how they end."
    )
    path.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    rows = _rows(sheet)
    rows[1]["grade"] = 2
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    before = path.read_text()
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"error: {sheet}:1: start: offsets 0-32 are not tokens:chunk:0's (0-50): its "
        "document changed since the sheet was written; pool it again\n"
    )
    assert path.read_text() == before


def test_difficulty_and_agreement_read_the_grades_of_spans(suite_dir, tmp_path, capsys):
    ranks = pd.DataFrame(
        [("Q1", "tokens:chunk:1", "a", 1), ("Q2", "limits:chunk:1", "a", 5)],
        columns=["query_id", "target_id", "system", "rank"],
    )
    by_ids, by_spans = load_suite(FIXTURES / "poolsuite"), load_suite(suite_dir)
    measured = pool.difficulty(by_spans, ranks, ["a"], 20)
    assert measured == pool.difficulty(by_ids, ranks, ["a"], 20)
    assert measured == {"Q1": "easy", "Q2": "hard", "Q3": "hard"}
    techdocs = ROOT / "data" / "suites" / "techdocs"
    kept = {q.id for q in load_suite(techdocs).queries}
    record = techdocs / "agreement" / "round1" / "second_pass.jsonl"
    rows = record.read_text(encoding="utf-8").splitlines()
    second = tmp_path / "second.jsonl"  # round 1's second pass on the queries still in the suite
    second.write_text(
        "".join(r + "\n" for r in rows if json.loads(r)["query_id"] in kept), encoding="utf-8"
    )
    assert main(["pool", "agree", str(techdocs), str(second)]) == 0
    assert capsys.readouterr().out.startswith(
        "771 pairs graded twice: 19.0% of the suite's 4052 judged pairs\n"
    )
