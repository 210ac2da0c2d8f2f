"""Two evidence-level judging passes compared (issue 33): grades (kappas against scikit-learn),
the token F1 of their evidence, the disagreements and the independence record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from rageval_pipeline.core.curation.readings import (
    Reading,
    compare_passes,
    evidence_tokens,
    read_pass,
    stamps,
    token_f1,
)
from rageval_pipeline.core.errors import InputError

TEXT = "Keys expire after 90 days. Rotate them with lexi keys rotate. Old keys stop at once."


def reading(target: str, grade: int, *quotes: str, judge: str = "one", at: int = 0) -> Reading:
    return Reading(
        query_id="Q1",
        target=target,
        grade=grade,
        evidence=list(quotes),
        judge=judge,
        graded_at=f"2026-11-28T16:0{at}:00+00:00",
        order=at + 1,
    )


def test_evidence_f1_counts_whitespace_tokens_the_quotes_cover():
    one = evidence_tokens(TEXT, ["Keys expire after 90 days."])
    other = evidence_tokens(TEXT, ["after 90  days. Rotate them"])  # spaces aside
    assert (one, other) == ({0, 1, 2, 3, 4}, {2, 3, 4, 5, 6})
    assert token_f1(one, other) == pytest.approx(2 * 3 / 10)
    assert token_f1(set(), set()) == 1.0
    # A quote found at several places covers them all.
    assert evidence_tokens(TEXT, ["keys"]) == {9, 12}


def test_compare_passes_gives_sklearns_kappas_and_lists_grade_and_evidence_disagreements():
    targets = [f"t{i}" for i in range(6)]
    first_grades, second_grades = [3, 2, 0, 1, 2, 0], [3, 1, 0, 1, 2, 1]
    quotes = {"t0": ("Keys expire after 90 days.", "Keys expire after 90 days.")}
    quotes |= {"t4": ("Keys expire after 90 days.", "Old keys stop at once.")}
    first, second = {}, []
    for target, a, b in zip(targets, first_grades, second_grades, strict=True):
        qa, qb = quotes.get(target, ("Rotate them", "Rotate them"))
        first[("Q1", target)] = reading(target, a, *([qa] if a else []))
        second.append(reading(target, b, *([qb] if b else []), judge="two"))
    report = compare_passes(first, second, dict.fromkeys(targets, TEXT))
    assert report.pairs == 6 and report.agree == 4
    for weights, value in (("linear", report.kappa_linear), ("quadratic", report.kappa_quadratic)):
        expected = cohen_kappa_score(
            first_grades, second_grades, labels=[0, 1, 2, 3], weights=weights
        )
        assert value == pytest.approx(expected)
    relevant = cohen_kappa_score([g >= 1 for g in first_grades], [g >= 1 for g in second_grades])
    assert report.kappa_relevant == pytest.approx(relevant)
    assert report.confusion[2][1] == 1 and report.confusion[0][1] == 1
    # Both >= 1: t0 (same quote), t1 and t3 (same), t4 (no shared token).
    assert report.both_relevant == 4 and report.low_overlap == 1
    assert report.mean_f1 == pytest.approx(3 / 4)
    assert [p.target for p in report.disagreements] == ["t1", "t4", "t5"]


def test_stamps_record_each_judges_times_and_order():
    rows = [
        reading("a", 1, "Rotate them", at=2),
        reading("b", 0, at=1),
        reading("c", 0, judge="x", at=5),
    ]
    [one, x] = stamps(rows)
    assert (one.judge, one.rows, one.first_order, one.last_order) == ("one", 2, 2, 3)
    assert (one.first_graded_at, one.last_graded_at) == (
        "2026-11-28T16:01:00+00:00",
        "2026-11-28T16:02:00+00:00",
    )
    assert x.queries_in_order == ["Q1"]


def test_a_pass_file_with_a_pair_read_twice_is_refused_naming_the_line(tmp_path: Path):
    path = tmp_path / "pass.jsonl"
    row = {"query_id": "Q1", "target": "a", "grade": 1, "evidence": ["x"]}
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_pass(path)
    assert "pass.jsonl:2: target: Q1 a is read again (first at line 1)" in str(error.value)
