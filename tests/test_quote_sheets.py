"""Quote-level judgments on a judging sheet (issue 33): the `evidence` column of `rageval pool
merge`, located in each target's text and stored as the target's judged region and its
evidence spans."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import suite_tables

POOLSUITE = Path(__file__).parent / "fixtures" / "pool" / "poolsuite"
TOKENS = (
    "# Tokens\nHow access tokens work.\n\n## Lifetime\nAn access token expires after one hour; "
    "refresh it before then.\n\n## Refresh\nCall the refresh endpoint with the refresh token to "
    "get a new access token.\n\n## Revocation\nRevoke a token by deleting it in the admin console."
)


@pytest.fixture
def suite_dir(tmp_path: Path, capsys) -> Path:
    """The pool suite, judged by spans."""
    folder = Path(shutil.copytree(POOLSUITE, tmp_path / "poolsuite"))
    assert main(["spans", "convert", str(folder)]) == 0
    capsys.readouterr()
    return folder


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _spans(suite_dir: Path, query: str) -> list[tuple[str, int, int]]:
    raw = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    [q] = [q for q in raw["queries"] if q["id"] == query]
    return [
        (TOKENS[s["start"] : s["end"]], s["grade"], s.get("primary", False)) for s in q["spans"]
    ]


def test_quotes_become_evidence_spans_inside_the_judged_region(suite_dir, tmp_path, capsys):
    """A quote written across a line break as a space is found; the section is stored as the
    judged region (grade 0) with the quote inside it (grade 2), hashed; the section's derived
    grade is the quote's."""
    refresh = (
        "## Refresh\nCall the refresh endpoint with the refresh token to get a new access token."
    )
    sheet = _jsonl(
        tmp_path / "sheet.jsonl",
        [
            {
                "query_id": "Q1",
                "target_id": "tokens:chunk:2",
                "grade": 2,
                "evidence": ["Call the refresh endpoint   with the refresh token"],
            }
        ],
    )
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 0
    assert "1 added" in capsys.readouterr().out
    spans = _spans(suite_dir, "Q1")
    assert spans[-2:] == [
        (refresh, 0, False),
        ("Call the refresh endpoint with the refresh token", 2, False),
    ]
    raw = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    last = raw["queries"][0]["spans"][-1]
    text = TOKENS[last["start"] : last["end"]].encode("utf-8")
    assert last["sha256"] == hashlib.sha256(text).hexdigest()
    qrels = suite_tables(load_suite(suite_dir)).qrels
    grades = {d: g for q, d, g in qrels[["query_id", "doc_id", "relevance"]].values if q == "Q1"}
    assert grades == {"tokens:chunk:1": 3, "tokens:chunk:3": 0, "tokens:chunk:2": 2}


def test_a_csv_sheet_carries_the_quotes_as_a_json_list(suite_dir, tmp_path, capsys):
    sheet = tmp_path / "sheet.csv"
    with sheet.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, ["query_id", "target_id", "grade", "evidence"])
        writer.writeheader()
        writer.writerow(
            {
                "query_id": "Q1",
                "target_id": "tokens:chunk:3",
                "grade": "1",
                "evidence": json.dumps(["Revoke a token", "in the admin console."]),
            }
        )
    assert main(["pool", "merge", str(suite_dir), str(sheet), "--overwrite"]) == 0
    assert "1 overwritten" in capsys.readouterr().out
    spans = _spans(suite_dir, "Q1")
    assert [s[:2] for s in spans[-3:]] == [
        ("## Revocation\nRevoke a token by deleting it in the admin console.", 0),
        ("Revoke a token", 1),
        ("in the admin console.", 1),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"grade": 2, "evidence": ["expires after two hours"]},
            "sheet.jsonl:1: evidence[0]: quote 'expires after two hours' is not in the text of "
            "tokens:chunk:1",
        ),
        (
            {"grade": 2, "evidence": ["An access token", "re"]},
            "sheet.jsonl:1: evidence[1]: quote 're' is in the text 4 times: quote more of "
            "tokens:chunk:1",
        ),
        (
            {"grade": 0, "evidence": ["An access token"]},
            "sheet.jsonl:1: evidence: a grade 0 names no evidence: leave it empty",
        ),
        (
            {"grade": 2, "evidence": "An access token"},
            "sheet.jsonl:1: evidence: must be a JSON list",
        ),
    ],
)
def test_a_quote_not_found_or_found_twice_is_refused_in_one_line(
    suite_dir, tmp_path, capsys, row, message
):
    before = (suite_dir / "suite.json").read_text(encoding="utf-8")
    sheet = _jsonl(
        tmp_path / "sheet.jsonl", [{"query_id": "Q1", "target_id": "tokens:chunk:1", **row}]
    )
    assert main(["pool", "merge", str(suite_dir), str(sheet), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert (suite_dir / "suite.json").read_text(encoding="utf-8") == before


def test_a_whole_document_is_graded_with_its_evidence_in_a_query_judged_by_spans(
    suite_dir, tmp_path, capsys
):
    """An entity judged as a whole (as in hotel) for a query not judged yet: the document is
    the judged region, the quote inside it the evidence, marked primary."""
    path = suite_dir / "suite.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["queries"].append({"id": "Q4", "query": "what is an access token", "intent": "factual"})
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    quote = "An access token expires after one hour;"
    row = {"query_id": "Q4", "target_id": "tokens", "grade": 2, "evidence": [quote]}
    assert main(["pool", "merge", str(suite_dir), str(_jsonl(tmp_path / "s.jsonl", [row]))]) == 0
    capsys.readouterr()
    assert _spans(suite_dir, "Q4") == [(TOKENS, 0, False), (quote, 2, True)]
