"""The nugget-level agreement of a drawn round: the draw, the matching rule and its boundary, the
figures on a small fixture (kappas against statsmodels), the reader's sheet refused in one line,
and the third reading's sheet and decisions."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from rageval_pipeline.core.curation import draw, nugget_third, nuggets
from rageval_pipeline.core.curation.draw import Nugget, PairReading
from rageval_pipeline.core.errors import InputError

TEXT = (
    "Pets are welcome. Two pets per room, each under 20 kg. The cleaning fee is $45 per stay, "
    "not per pet. Parking is free for guests."
)


def reading(query: str, target: str, *nuggets_: tuple[str, int]) -> PairReading:
    found = [Nugget(quote=q, grade=g) for q, g in nuggets_]
    return PairReading(
        query_id=query,
        target_id=target,
        grade=max((n.grade for n in found), default=0),
        nuggets=found,
    )


# --- the matching rule ------------------------------------------------------------------------


def test_a_match_needs_half_of_the_shorter_nuggets_tokens():
    # 4 tokens, 2 shared: exactly half, a match (a threshold above 0.5 loses it)
    assert nuggets.match([{0, 1, 2, 3}], [{2, 3, 4, 5, 6, 7}]) == [(0, 0)]
    # 5 tokens, 2 shared: below half, no match (a threshold of 0.4 would match)
    assert nuggets.match([{0, 1, 2, 3, 4}], [{3, 4, 5, 6, 7, 8}]) == []


def test_matching_is_one_to_one_most_shared_first():
    ours = [{0, 1, 2, 3}, {4, 5, 6, 7}]
    theirs = [{0, 1, 2, 3, 4, 5, 6, 7}]  # one long quote over both suite nuggets
    assert nuggets.match(ours, theirs) == [(0, 0)]  # equal shares: the first in file order
    theirs = [{2, 3, 4, 5, 6, 7}, {0, 1}]
    # (1, 0) shares 4, taken first; (0, 1) shares 2 of the shorter's 2
    assert nuggets.match(ours, theirs) == [(0, 1), (1, 0)]


# --- figures on a fixture ---------------------------------------------------------------------


def fixture() -> list[nuggets.Compared]:
    suite_a = reading(
        "q1", "t", ("Two pets per room, each under 20 kg.", 1), ("The cleaning fee is $45", 3)
    )
    # the reader extends the fee nugget (a match), grades it 2, and misses the size limit
    reader_a = reading("q1", "t", ("The cleaning fee is $45 per stay, not per pet.", 2))
    suite_b = reading("q2", "t", ("Parking is free for guests.", 2))
    reader_b = reading("q2", "t", ("Parking is free for guests.", 2), ("Pets are welcome.", 1))
    suite_c, reader_c = reading("q3", "t"), reading("q3", "t", ("Pets are welcome.", 2))
    return [
        nuggets.compare_pair(TEXT, "nuggets", suite_a, reader_a),
        nuggets.compare_pair(TEXT, "nuggets", suite_b, reader_b),
        nuggets.compare_pair(TEXT, "none", suite_c, reader_c),
    ]


def test_nugget_figures_on_a_fixture():
    pairs = fixture()
    assert [p.matches for p in pairs] == [[(1, 0)], [(0, 0)], []]
    found = nuggets.nugget_figures(pairs)
    assert (found.suite_nuggets, found.reader_nuggets, found.matched) == (3, 4, 2)
    assert found.grade_raw == 0.5 and found.grade_within_one == 1.0
    assert found.unmatched_suite == {1: 1, 2: 0, 3: 0}
    assert found.unmatched_reader == {1: 1, 2: 1, 3: 0}
    # TEXT's whitespace tokens, counted by hand
    suite_tokens = 8 + 5 + 5  # size limit, "The cleaning fee is $45", parking
    reader_tokens = 10 + 5 + 3 + 3  # fee sentence, parking, pets (q2 and q3)
    shared = 5 + 5
    assert found.token_precision == pytest.approx(shared / reader_tokens)
    assert found.token_recall == pytest.approx(shared / suite_tokens)
    p, r = shared / reader_tokens, shared / suite_tokens
    assert found.token_f1 == pytest.approx(2 * p * r / (p + r))
    assert found.nugget_f1 == pytest.approx(2 * 2 / (3 + 4))
    assert [p.disagrees for p in pairs] == [True, False, True]


def test_pair_grades_per_stratum_and_weighted_against_statsmodels():
    pairs = fixture()
    found = nuggets.agreement(pairs, {"nuggets": 300, "none": 3000}, {"nuggets": 2, "none": 1})
    # suite grades 3, 2, 0; reader grades 2, 2, 2
    assert found.grades.confusion[3][2] == 1 and found.grades.agree == 1
    weights = [150.0, 150.0, 3000.0]
    assert found.weighted.raw == pytest.approx(150 / 3300)
    assert found.weighted.confusion[0][2] == 3000.0
    table = found.weighted.confusion
    linear, quadratic = found.weighted.kappa_linear, found.weighted.kappa_quadratic
    assert linear == pytest.approx(cohens_kappa(table, wt="linear", return_results=False))
    assert quadratic == pytest.approx(cohens_kappa(table, wt="quadratic", return_results=False))
    assert sum(weights) == found.weighted.population
    nugget_stratum = next(s for s in found.strata if s.stratum == "nuggets")
    assert (nugget_stratum.read, nugget_stratum.population) == (2, 300)
    assert found.disagreements == 2


def test_unweighted_kappas_against_statsmodels():
    suite = [0, 1, 2, 3, 3, 2, 1, 0, 2, 3]
    reader = [0, 2, 2, 3, 1, 2, 0, 0, 3, 3]
    pairs = [
        nuggets.Compared(
            stratum="nuggets",
            suite=reading("q", str(k), *([("x", a)] if a else [])),
            reader=reading("q", str(k), *([("x", b)] if b else [])),
            matches=[],
            suite_tokens=0,
            reader_tokens=0,
            shared_tokens=0,
        )
        for k, (a, b) in enumerate(zip(suite, reader, strict=True))
    ]
    found = nuggets.agreement(pairs, {"nuggets": 10, "none": 0}, {"nuggets": 10, "none": 0})
    table = found.grades.confusion
    assert found.grades.kappa_linear == pytest.approx(cohens_kappa(table, wt="linear").kappa)
    assert found.grades.kappa_quadratic == pytest.approx(cohens_kappa(table, wt="quadratic").kappa)
    # one stratum: weighting by its population changes no figure
    assert found.weighted.kappa_linear == pytest.approx(found.grades.kappa_linear)


# --- the draw ---------------------------------------------------------------------------------


def population() -> list[PairReading]:
    pairs = [reading(f"q{k:02d}", "t", ("Pets are welcome.", 1 + k % 3)) for k in range(30)]
    return pairs + [reading(f"q{k:02d}", "u") for k in range(100)]


def test_the_draw_is_reproduced_from_its_seed_and_refuses_another_population():
    pairs = population()
    record = draw.SeedRecord(
        suite="s",
        seed=7,
        unit="u",
        strata=draw.strata(pairs, {"nuggets": 6, "none": 4}),
        recorded_at="2026-01-01T00:00:00Z",
    )
    drawn = draw.draw(pairs, record)
    assert draw.draw(list(reversed(pairs)), record) == drawn  # the file order does not matter
    assert sum(p.grade >= 1 for p in drawn) == 6 and len(drawn) == 10
    assert len({p.key for p in drawn}) == 10
    other = record.model_copy(update={"seed": 8})
    assert draw.draw(pairs, other) != drawn
    with pytest.raises(draw.DrawError, match="'none'"):
        draw.draw(pairs[:-1], record)


def test_the_draw_is_uniform_within_a_stratum():
    pairs = population()
    counts: dict[str, int] = {}
    for seed in range(400):
        record = draw.SeedRecord(
            suite="s",
            seed=seed,
            unit="u",
            strata=draw.strata(pairs, {"nuggets": 3, "none": 0}),
            recorded_at="",
        )
        for p in draw.draw(pairs, record):
            counts[p.query_id] = counts.get(p.query_id, 0) + 1
    # 400 draws of 3 out of 30: each pair expected 40 times
    assert len(counts) == 30 and min(counts.values()) > 15 and max(counts.values()) < 70


# --- the reader's sheet -----------------------------------------------------------------------


def write(path, *rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_bad_reading_is_refused_in_one_line(tmp_path):
    texts = {("q1", "t"): TEXT}
    good = {
        "query_id": "q1",
        "target_id": "t",
        "grade": 2,
        "why": "w",
        "nuggets": [{"quote": "Parking is  free\nfor guests.", "grade": 2}],
    }
    found = nuggets.read_readings(write(tmp_path / "a.jsonl", good), texts)
    assert found["q1", "t"].nuggets[0].grade == 2
    cases = [
        ({**good, "grade": 3}, "1: grade: grade 3 is not the highest nugget grade (2)"),
        ({**good, "nuggets": [{"quote": "Parking is paid", "grade": 2}]}, "nuggets[0].quote"),
        (
            {**good, "nuggets": [{"quote": "Parking is free", "grade": 2, "decisive": "paid"}]},
            "nuggets[0].decisive",
        ),
        ({**good, "target_id": "v"}, "is not a pair of this sheet"),
        ({**good, "nuggets": [{"quote": "Parking", "grade": 4}]}, "nuggets.0.grade"),
    ]
    for row, message in cases:
        with pytest.raises(InputError, match=re.escape(message)):
            nuggets.read_readings(write(tmp_path / "b.jsonl", row), texts)
    with pytest.raises(InputError, match="2: target_id: this pair is read twice"):
        nuggets.read_readings(write(tmp_path / "c.jsonl", good, good), texts)
    blank = {**good, "grade": None, "nuggets": []}
    assert nuggets.read_readings(write(tmp_path / "d.jsonl", blank), texts, full=False) == {}
    with pytest.raises(InputError, match="every pair is read"):
        nuggets.read_readings(write(tmp_path / "d.jsonl", blank), texts)


# --- the third reading ------------------------------------------------------------------------


def test_the_third_sheet_is_blind_and_its_key_names_each_reading():
    pairs = fixture()
    sheet = {p.suite.key: {"query": "?", "title": "T", "target_text": TEXT} for p in pairs}
    rows, key = nugget_third.third_rows(pairs, sheet, seed=5, scope="s")
    assert [r["query_id"] for r in rows] == ["q1", "q3"]  # the disagreements only
    for row in rows:
        which = key[f"{row['query_id']}|{row['target_id']}"]
        pair = next(p for p in pairs if p.suite.query_id == row["query_id"])
        shown = pair.suite if which == "suite" else pair.reader
        assert row["reading_1"]["grade"] == shown.grade
        assert row["grade"] is None and row["nuggets"] == []
        assert "suite" not in json.dumps(row)


def test_decided_nuggets_become_decisions_regrade_split_drop_and_new():
    now = reading(
        "q1",
        "t",
        ("Two pets per room, each under 20 kg.", 1),
        ("The cleaning fee is $45 per stay, not per pet.", 2),
        ("Parking is free for guests.", 1),
    )
    decided = reading(
        "q1",
        "t",
        ("Two pets per room,  each under 20 kg.", 2),  # regraded
        ("The cleaning fee is $45 per stay", 3),  # the fee sentence split
        ("not per pet.", 3),
        ("Pets are welcome.", 1),  # new; parking dropped
    )
    rows = nugget_third.decisions(now, decided, "doc", "why")
    assert [(r["span"], [(n["quote"], n["grade"]) for n in r["nuggets"]]) for r in rows] == [
        ("Two pets per room, each under 20 kg.", [("Two pets per room,  each under 20 kg.", 2)]),
        (
            "The cleaning fee is $45 per stay, not per pet.",
            [("The cleaning fee is $45 per stay", 3), ("not per pet.", 3)],
        ),
        ("Parking is free for guests.", [("Parking is free for guests.", 0)]),
        (None, [("Pets are welcome.", 1)]),
    ]
    assert nugget_third.decisions(now, now, "doc", "why") == []


# --- the committed round and the script -------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location(
        "nugget_agreement", ROOT / "scripts" / "nugget_agreement.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["techdocs", "hotel"])
def test_the_committed_round3_sheet_is_blind_and_holds_the_sample(name):
    folder = ROOT / "data" / "suites" / name / "agreement" / "round3"
    record = draw.SeedRecord.model_validate_json((folder / "seed.json").read_text())
    sample = [json.loads(line) for line in (folder / "sample.jsonl").read_text().splitlines()]
    sheet = [json.loads(line) for line in (folder / "sheet.jsonl").read_text().splitlines()]
    assert record.drawn_at is not None and record.recorded_at < record.drawn_at
    for stratum, size in record.strata.items():
        assert sum(PairReading.model_validate(r).stratum == stratum for r in sample) == size.sample
    assert [(r["order"], r["query_id"], r["target_id"]) for r in sheet] == [
        (r["order"], r["query_id"], r["target_id"]) for r in sample
    ]
    for row, drawn in zip(sheet, sample, strict=True):
        assert set(row) == {
            "order",
            "query_id",
            "query",
            "target_id",
            "title",
            "target_text",
            "grade",
            "nuggets",
            "why",
        }
        assert (row["grade"], row["nuggets"], row["why"]) == (None, [], "")
        for nugget in drawn["nuggets"]:  # the suite's quotes are the target's text
            assert nugget["quote"] in row["target_text"]


def test_compare_and_third_from_a_round_folder(tmp_path, monkeypatch):
    script = load_script()
    source = ROOT / "data" / "suites" / "techdocs" / "agreement" / "round3"
    folder = tmp_path / "round3"
    shutil.copytree(source, folder)
    for extra in (
        "second.jsonl",
        "agreement.json",
        "agreement.md",
        "third.jsonl",
        "third_key.json",
    ):
        (folder / extra).unlink(missing_ok=True)
    monkeypatch.setattr(script, "round_folder", lambda name, number: folder)
    sample = [json.loads(line) for line in (folder / "sample.jsonl").read_text().splitlines()]
    sheet = {
        (r["query_id"], r["target_id"]): r
        for r in map(json.loads, (folder / "sheet.jsonl").read_text().splitlines())
    }
    emptied = next(k for k, row in enumerate(sample) if row["grade"] >= 2)
    read = sample[: max(30, emptied + 1)]
    second = []
    for k, row in enumerate(read):
        mine = dict(sheet[row["query_id"], row["target_id"]])
        if k == emptied:  # read without a nugget: a disagreement
            mine["nuggets"], mine["grade"] = [], 0
        else:
            mine["nuggets"], mine["grade"] = row["nuggets"], row["grade"]
        second.append(mine)
    filled = write(tmp_path / "second.jsonl", *second)
    script.compare("techdocs", "3", filled)
    found = json.loads((folder / "agreement.json").read_text())
    assert found["pairs_read"] == len(read)
    assert found["grades"]["agree"] == len(read) - 1
    assert found["disagreements"] == 1
    suite_nuggets = sum(len(r["nuggets"]) for r in read)
    assert found["nuggets"]["matched"] == suite_nuggets - len(sample[emptied]["nuggets"])
    assert found["nuggets"]["token_precision"] == 1.0 and found["nuggets"]["token_recall"] < 1
    before = (folder / "agreement.json").read_bytes()
    script.compare("techdocs", "3")  # reproduced from the stored record
    assert (folder / "agreement.json").read_bytes() == before
    script.third("techdocs", "3", tmp_path)
    rows = (tmp_path / "third-techdocs.jsonl").read_text().splitlines()
    assert [json.loads(r)["query_id"] for r in rows] == [sample[emptied]["query_id"]]
