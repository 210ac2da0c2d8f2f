"""`rageval pool agree`: a second judging pass compared with the suite's grades, resolved by rule
and recorded."""

import json
import shutil
from pathlib import Path

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation import agreement
from rageval_pipeline.core.suites.golden import load_suite

FIXTURE = Path(__file__).parent / "fixtures" / "agreement" / "agreesuite"
# (query, target, second grade); the suite's grades are 3, 2, 0, 2, 3, 0, 1, 2.
SECOND = [
    ("Q1", "tokens:chunk:1", 2),  # the primary lowered to a tie with tokens:chunk:2: allowed
    ("Q1", "tokens:chunk:2", 2),
    ("Q1", "tokens:chunk:3", 1),
    ("Q2", "limits:chunk:0", 2),
    ("Q2", "limits:chunk:1", 1),  # the primary would fall below limits:chunk:0 (2)
    ("Q3", "tokens:chunk:3", 1),  # an edge query has no primary: no grade >= 1
    ("Q4", "tokens:chunk:1", 3),  # would rise above the primary tokens:chunk:2 (2)
    ("Q4", "tokens:chunk:2", 2),
]
FIRST = [3, 2, 0, 2, 3, 0, 1, 2]


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "agreesuite"))


def _sheet(tmp_path: Path, rows=SECOND) -> Path:
    path = tmp_path / "second.jsonl"
    lines = [json.dumps({"query_id": q, "target_id": t, "grade": g}) for q, t, g in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _judgments(suite_dir: Path) -> dict[str, dict[str, int]]:
    raw = json.loads((suite_dir / "suite.json").read_text())
    return {q["id"]: q.get("judgments", {}) for q in raw["queries"]}


def test_kappas_raw_agreement_and_confusion_match_sklearn(tmp_path):
    from sklearn.metrics import cohen_kappa_score, confusion_matrix  # 1.6 s: not at collection

    report = agreement.compare(load_suite(FIXTURE), _sheet(tmp_path))
    second = [g for _, _, g in SECOND]
    grades = [0, 1, 2, 3]
    assert (report.pairs, report.suite_pairs, report.agree) == (8, 9, 3)
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
    sheet = _sheet(tmp_path)
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "agree", str(suite_dir), str(sheet)]) == 0
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
        "5 disagreements (resolved by lower):\n"
        "  Q1 tokens:chunk:1: suite 3, second 2 -> 2\n"
        "  Q1 tokens:chunk:3: suite 0, second 1 -> 0\n"
        "  Q2 limits:chunk:1: suite 3, second 1 -> 3 "
        "(primary: keeps the higher grade so that it stays top-graded)\n"
        "  Q3 tokens:chunk:3: suite 0, second 1 -> 0\n"
        "  Q4 tokens:chunk:1: suite 1, second 3 -> 1\n"
    )
    assert (suite_dir / "suite.json").read_bytes() == original  # nothing written without --write


def test_write_resolves_by_the_lower_grade_keeping_the_primary_top(suite_dir, tmp_path, capsys):
    before = _judgments(suite_dir)
    assert main(["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--write"]) == 0
    assert capsys.readouterr().out.endswith(
        f"wrote 1 changed grade(s) to {suite_dir / 'suite.json'}\n"
    )
    # Only the primary of Q1 drops (to a tie); Q2's primary keeps 3 as an exception.
    before["Q1"]["tokens:chunk:1"] = 2
    assert _judgments(suite_dir) == before
    assert load_suite(suite_dir).queries[0].primary == "tokens:chunk:1"


@pytest.mark.parametrize(
    ("rule", "changes", "exceptions"),
    [
        ("first", {}, []),
        (
            "second",
            {("Q1", "tokens:chunk:1"): 2, ("Q1", "tokens:chunk:3"): 1},
            [("Q2", "limits:chunk:1", 3), ("Q3", "tokens:chunk:3", 0), ("Q4", "tokens:chunk:1", 1)],
        ),
    ],
)
def test_other_rules_and_their_exceptions(tmp_path, rule, changes, exceptions):
    report = agreement.compare(load_suite(FIXTURE), _sheet(tmp_path), rule)
    assert report.changes() == changes
    assert [(d.query_id, d.target_id, d.resolved) for d in report.disagreements if d.exception] == (
        exceptions
    )


def test_record_writes_the_second_pass_and_the_disagreements(suite_dir, tmp_path, capsys):
    record = tmp_path / "agreement"
    argv = ["pool", "agree", str(suite_dir), str(_sheet(tmp_path)), "--record", str(record)]
    assert main([*argv, "--resolve", "lower"]) == 0
    second = [json.loads(line) for line in (record / "second_pass.jsonl").read_text().splitlines()]
    assert second[0] == {
        "query_id": "Q1",
        "query": "how long does an access token last",
        "target_id": "tokens:chunk:1",
        "grade": 2,
    }
    assert [(r["query_id"], r["target_id"], r["grade"]) for r in second] == SECOND
    lines = (record / "disagreements.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines][2] == {
        "query_id": "Q2",
        "target_id": "limits:chunk:1",
        "first": 3,
        "second": 1,
        "resolved": 3,
        "rule": "lower",
        "exception": "primary: keeps the higher grade so that it stays top-graded",
    }
    assert len(lines) == 5


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
def test_a_bad_row_is_one_line_and_nothing_is_written(suite_dir, tmp_path, capsys, row, message):
    sheet = tmp_path / "second.jsonl"
    first = {"query_id": "Q1", "target_id": "tokens:chunk:1", "grade": 2}
    sheet.write_text(json.dumps(first) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    original = (suite_dir / "suite.json").read_bytes()
    argv = ["pool", "agree", str(suite_dir), str(sheet), "--write", "--record", str(tmp_path / "r")]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"error: {sheet}:2: {message}\n")
    assert (suite_dir / "suite.json").read_bytes() == original
    assert not (tmp_path / "r").exists()


def test_a_csv_second_pass_is_read_too(tmp_path):
    sheet = tmp_path / "second.csv"
    sheet.write_text(
        "query_id,target_id,grade\n" + "".join(f"{q},{t},{g}\n" for q, t, g in SECOND),
        encoding="utf-8",
    )
    assert agreement.compare(load_suite(FIXTURE), sheet).second_pass == SECOND


def test_agree_needs_a_suite_and_a_sheet(capsys):
    assert main(["pool", "agree", str(FIXTURE)]) == 2
    assert capsys.readouterr().err == (
        "error: usage: rageval pool agree SUITE SHEET [--resolve lower|first|second] "
        "[--write] [--record DIR]\n"
    )
