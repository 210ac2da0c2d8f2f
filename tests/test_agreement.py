"""`rageval pool agree`: a second judging pass compared with the suite's grades, its
disagreements written blind for a third reader, and the third reading's decisions stored."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation import agreement, third
from rageval_pipeline.core.suites.golden import load_suite

FIXTURE = Path(__file__).parent / "fixtures" / "agreement" / "agreesuite"
TINY = Path(__file__).parent / "fixtures" / "suites" / "tiny"  # Q002 judged by documents
# (query, target, second grade); the suite's grades are 3, 2, 0, 2, 3, 0, 1, 2.
SECOND = [
    ("Q1", "tokens:chunk:1", 2),
    ("Q1", "tokens:chunk:2", 2),
    ("Q1", "tokens:chunk:3", 1),
    ("Q2", "limits:chunk:0", 2),
    ("Q2", "limits:chunk:1", 1),  # the primary: decided 1, it falls below limits:chunk:0 (2)
    ("Q3", "tokens:chunk:3", 1),
    ("Q4", "tokens:chunk:1", 3),
    ("Q4", "tokens:chunk:2", 2),
]
FIRST = [3, 2, 0, 2, 3, 0, 1, 2]
DISAGREEMENTS = [
    ("Q1", "tokens:chunk:1", 3, 2),
    ("Q1", "tokens:chunk:3", 0, 1),
    ("Q2", "limits:chunk:1", 3, 1),
    ("Q3", "tokens:chunk:3", 0, 1),
    ("Q4", "tokens:chunk:1", 1, 3),
]
# The third reader's grade of each disagreement, in sheet order.
DECIDED = [3, 1, 1, 0, 1]


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "agreesuite"))


def _sheet(tmp_path: Path, rows=SECOND) -> Path:
    path = tmp_path / "second.jsonl"
    lines = [json.dumps({"query_id": q, "target_id": t, "grade": g}) for q, t, g in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _judgments(suite_dir: Path) -> dict[str, dict[str, int]]:
    raw = json.loads((suite_dir / "suite.json").read_text())
    return {q["id"]: q.get("judgments", {}) for q in raw["queries"]}


def _blind(suite_dir: Path, tmp_path: Path, name: str = "third.csv") -> Path:
    """Write the third sheet through the CLI; return it."""
    sheet = tmp_path / name
    argv = ["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--third-sheet", str(sheet)]
    assert main([*argv, "--output", str(tmp_path / "record"), "--seed", "5"]) == 0
    return sheet


def _decide(sheet: Path, grades=DECIDED, quotes=None) -> None:
    """Fill the grade (and evidence) column of a third sheet, as a reader in a spreadsheet."""
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row, grade in zip(rows, grades, strict=True):
        row["grade"] = "" if grade is None else str(grade)
        row["evidence"] = json.dumps((quotes or {}).get(row["target_id"], []))
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=third.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def test_kappas_raw_agreement_and_confusion_match_sklearn(tmp_path):
    from sklearn.metrics import cohen_kappa_score, confusion_matrix  # 1.6 s: not at collection

    report = third.compare(load_suite(FIXTURE), _sheet(tmp_path))
    second = [g for _, _, g in SECOND]
    grades = [0, 1, 2, 3]
    assert (report.pairs, report.agree) == (8, 3)
    assert report.raw == 3 / 8
    for weights, value in (("linear", report.kappa_linear), ("quadratic", report.kappa_quadratic)):
        assert value == pytest.approx(
            cohen_kappa_score(FIRST, second, labels=grades, weights=weights)
        )
    for at, value in ((1, report.kappa_relevant), (2, report.kappa_highly)):
        assert value == pytest.approx(
            cohen_kappa_score([a >= at for a in FIRST], [b >= at for b in second])
        )
    assert report.confusion == confusion_matrix(FIRST, second, labels=grades).tolist()
    # The weights measure distance on the 0-3 scale even when a grade never occurs.
    assert agreement.kappa([0, 3, 0], [0, 3, 3], "linear") == pytest.approx(
        cohen_kappa_score([0, 3, 0], [0, 3, 3], labels=grades, weights="linear")
    )
    assert agreement.kappa([1, 1], [1, 1], "linear") is None


def test_agree_prints_the_figures_and_every_disagreement(suite_dir, tmp_path, capsys):
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "agree", str(suite_dir), str(_sheet(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "8 pairs graded twice: 88.9% of the suite's 9 judged pairs\nraw agreement 0.375 (3 of 8)\n"
    )
    assert out.endswith(
        "confusion (rows: suite grade, columns: second grade):\n"
        "        0     1     2     3\n"
        "  0     0     2     0     0\n"
        "  1     0     0     0     1\n"
        "  2     0     0     3     0\n"
        "  3     0     1     1     0\n"
        "5 disagreements, for a third reading:\n"
        + "".join(f"  {q} {t}: suite {a}, second {b}\n" for q, t, a, b in DISAGREEMENTS)
    )
    assert (suite_dir / "suite.json").read_bytes() == original  # nothing written


@pytest.mark.parametrize("name", ["third.csv", "third.jsonl"])
def test_the_third_sheet_is_blind_and_its_key_kept_with_the_record(suite_dir, tmp_path, name):
    original = (suite_dir / "suite.json").read_bytes()
    sheet = _blind(suite_dir, tmp_path, name)
    if name.endswith(".csv"):
        with sheet.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    else:
        rows = _jsonl(sheet)
    assert list(rows[0]) == list(third.COLUMNS)  # no judge names, no pass names
    key = json.loads((tmp_path / "record" / third.KEY_FILE).read_text())
    assert (key["seed"], key["scope"]) == (5, "agreesuite")
    suite = load_suite(FIXTURE)
    for row, (q, t, first, second) in zip(rows, DISAGREEMENTS, strict=True):
        assert (row["query_id"], row["target_id"], row["grade"]) == (q, t, "")
        assert row["target_text"] == third.target_text(suite, t)
        shown = key["reading_1"][f"{q}|{t}"]
        assert shown == ("second" if third.swapped(5, "agreesuite", q, t) else "first")
        one, two = (first, second) if shown == "first" else (second, first)
        assert (int(row["reading_1_grade"]), int(row["reading_2_grade"])) == (one, two)
    # The seed draws both orders over the five rows, and the suite is untouched.
    assert set(key["reading_1"].values()) == {"first", "second"}
    assert (suite_dir / "suite.json").read_bytes() == original


def test_the_third_reading_is_stored_and_recorded(suite_dir, tmp_path, capsys):
    sheet = _blind(suite_dir, tmp_path)
    _decide(sheet)
    record = tmp_path / "record"
    argv = ["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--third", str(sheet)]
    assert main([*argv, "--write", "--output", str(record)]) == 0
    assert f"merged {sheet} into {suite_dir / 'suite.json'}" in capsys.readouterr().out
    judgments = _judgments(suite_dir)
    assert judgments["Q1"] == {
        "tokens:chunk:0": 1,
        "tokens:chunk:1": 3,  # the suite's grade, not the lower one
        "tokens:chunk:2": 2,
        "tokens:chunk:3": 1,  # the second pass's, higher
    }
    assert judgments["Q2"] == {"limits:chunk:0": 2, "limits:chunk:1": 1}
    assert judgments["Q4"]["tokens:chunk:1"] == 1
    # The primary regraded below another target moves to the highest grade.
    assert load_suite(suite_dir).queries[1].primary_id == "limits:chunk:0"
    rows = _jsonl(record / "disagreements.jsonl")
    assert rows[0] == {
        "query_id": "Q1",
        "query": "how long does an access token last",
        "target_id": "tokens:chunk:1",
        "first": {"grade": 3, "evidence": []},
        "second": {"grade": 2, "evidence": []},
        "evidence_f1": None,
        "third": {"grade": 3, "evidence": []},
    }
    assert [r["third"]["grade"] for r in rows] == DECIDED
    assert [
        (r["query_id"], r["target_id"], r["grade"]) for r in _jsonl(record / "second_pass.jsonl")
    ] == SECOND
    assert json.loads((record / "agreement.json").read_text())["agree"] == 3


def test_write_without_a_third_reading_is_refused(suite_dir, tmp_path, capsys):
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--write"]) == 2
    assert capsys.readouterr() == (
        "",
        "error: --write: a disagreement is decided by a third reading, not by rule: write its "
        "sheet with --third-sheet PATH --output DIR, have it graded, then --third PATH --write\n",
    )
    argv = ["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--third-sheet", "t.csv"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "error: --third-sheet: give --output DIR: the sheet's key is kept there\n"
    )
    assert (suite_dir / "suite.json").read_bytes() == original


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rows: rows[2].update(grade=""),
            ":6: grade: undecided: the third reading must grade every disagreement",
        ),
        (
            lambda rows: rows[2].update(target_id="limits:chunk:0"),
            ":6: target_id: Q2 limits:chunk:0 is not a disagreement of this second pass",
        ),
        (
            lambda rows: rows.pop(2),
            ": target_id: 1 disagreement(s) have no row, first Q2 limits:chunk:1",
        ),
        (
            lambda rows: rows[0].update(evidence='["lasts a week"]'),
            ":2: evidence[0]: quote 'lasts a week' is not in the text of tokens:chunk:1",
        ),
    ],
)
def test_a_bad_third_sheet_is_one_line_and_nothing_is_written(
    suite_dir, tmp_path, capsys, edit, message
):
    sheet = _blind(suite_dir, tmp_path)
    _decide(sheet)
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    edit(rows)
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=third.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    capsys.readouterr()
    original = (suite_dir / "suite.json").read_bytes()
    argv = ["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--third", str(sheet)]
    assert main([*argv, "--write", "--output", str(tmp_path / "after")]) == 2
    out, err = capsys.readouterr()
    assert (out, err.count("\n")) == ("", 1)
    assert err == f"error: {sheet}{message}\n"
    assert (suite_dir / "suite.json").read_bytes() == original
    assert not (tmp_path / "after").exists()


def test_quotes_are_compared_and_the_decided_quotes_stored_as_spans(tmp_path, capsys):
    folder = Path(shutil.copytree(FIXTURE, tmp_path / "agreesuite"))
    assert main(["spans", "convert", str(folder)]) == 0
    second = tmp_path / "second.jsonl"
    row = {"query_id": "Q1", "target_id": "tokens:chunk:1", "grade": 3}
    row["evidence"] = ["expires after one hour"]
    second.write_text(json.dumps(row) + "\n", encoding="utf-8")
    sheet = tmp_path / "third.jsonl"
    argv = ["pool", "agree", str(folder), str(second), "--output", str(tmp_path / "record")]
    capsys.readouterr()
    assert main([*argv, "--third-sheet", str(sheet), "--seed", "1"]) == 0
    out = capsys.readouterr().out
    # Same grade, but the quote covers 4 of the section's 13 tokens: F1 8/17, below 0.5.
    assert "evidence F1 over the 1 pairs both grade >= 1: mean 0.471, 1 below 0.5\n" in out
    assert "  Q1 tokens:chunk:1: suite 3, second 3, evidence F1 0.47\n" in out
    [blind] = _jsonl(sheet)
    blind.update(grade=3, evidence=["An access token expires after one hour"])
    sheet.write_text(json.dumps(blind) + "\n", encoding="utf-8")
    assert main([*argv, "--third", str(sheet), "--write"]) == 0
    query = load_suite(folder).queries[0]
    text = load_suite(folder).reference.texts["tokens"]
    graded = {text[e.start : e.end]: g for e, g in query.evidence}
    assert graded["An access token expires after one hour"] == 3
    assert query.primary_id == "tokens:chunk:1"


def test_a_suite_judged_by_whole_documents_is_decided_too(tmp_path, capsys):
    """The third sheet's empty evidence column is no quote: a query judged by documents
    takes its decision."""
    folder = Path(shutil.copytree(TINY, tmp_path / "tiny"))
    second = _sheet(tmp_path, [("Q002", "limits", 1), ("Q002", "faq", 0)])
    sheet, record = tmp_path / "third.jsonl", str(tmp_path / "record")
    argv = ["pool", "agree", str(folder), str(second), "--output", record]
    assert main([*argv, "--third-sheet", str(sheet), "--seed", "3"]) == 0
    [blind] = _jsonl(sheet)
    assert (blind["target_id"], blind["evidence"]) == ("limits", [])
    blind["grade"] = 2
    sheet.write_text(json.dumps(blind) + "\n", encoding="utf-8")
    assert main([*argv, "--third", str(sheet), "--write"]) == 0
    assert _judgments(folder)["Q002"] == {"limits": 2, "faq": 0}
    assert _jsonl(tmp_path / "record" / "disagreements.jsonl")[0]["third"] == {
        "grade": 2,
        "evidence": [],
    }


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"query_id": "Q9", "target_id": "tokens:chunk:0", "grade": 1},
            "query_id: unknown query 'Q9'",
        ),
        (
            {"query_id": "Q2", "target_id": "tokens:chunk:0", "grade": 1},
            "target_id: Q2 tokens:chunk:0 has no grade in the suite to compare with",
        ),
        (
            {"query_id": "Q2", "target_id": "limits:chunk:1", "grade": 4},
            "grade: must be 0, 1, 2 or 3 (got 4)",
        ),
        (
            {"query_id": "Q2", "target_id": "limits:chunk:1", "grade": ""},
            "grade: missing: a second pass must grade every row",
        ),
        (
            {"query_id": "Q1", "target_id": "tokens:chunk:1", "grade": 1},
            "target_id: Q1 tokens:chunk:1 is graded again (first at line 1)",
        ),
    ],
)
def test_a_bad_second_pass_row_is_one_line(suite_dir, tmp_path, capsys, row, message):
    sheet = tmp_path / "second.jsonl"
    first = {"query_id": "Q1", "target_id": "tokens:chunk:1", "grade": 2}
    sheet.write_text(json.dumps(first) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    argv = ["pool", "agree", str(suite_dir), str(sheet), "--output", str(tmp_path / "r")]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"error: {sheet}:2: {message}\n")
    assert not (tmp_path / "r").exists()


def test_a_csv_second_pass_is_read_too(tmp_path):
    sheet = tmp_path / "second.csv"
    sheet.write_text(
        "query_id,target_id,grade\n" + "".join(f"{q},{t},{g}\n" for q, t, g in SECOND),
        encoding="utf-8",
    )
    report = third.compare(load_suite(FIXTURE), sheet)
    assert [(p.query_id, p.target, p.second.grade) for p in report.compared] == SECOND


def test_agree_needs_a_suite_and_a_sheet(capsys):
    with pytest.raises(SystemExit) as done:
        main(["pool", "agree", str(FIXTURE)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: rageval pool agree [-h]")
    assert err.endswith("error: the following arguments are required: SHEET\n")
