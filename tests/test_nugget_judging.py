"""scripts/nugget_judging.py apply: decisions replay onto a suite idempotently, also when a later
decision splits a nugget an earlier one made (a chain), and a decision that names a nugget no
longer in the suite is refused in one line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rageval_pipeline.core.curation.rewrite import rewrite_suite
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.golden import load_suite
from tests.test_nugget_format import LOG, NUGGET, region_and_nugget, write_suite

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "nugget_judging.py"
FEE = "the $45 cleaning fee is per stay, not per pet."


def judging():
    spec = importlib.util.spec_from_file_location("nugget_judging", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def apply(folder: Path, decisions: list[dict]) -> int:
    path = folder / "decisions.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in decisions), encoding="utf-8")
    step = judging().Apply(load_suite(folder), path)
    rewrite_suite(folder / "suite.json", step)
    return step.applied


def nuggets(folder: Path) -> list[tuple[str, int]]:
    spans = json.loads((folder / "suite.json").read_text())["queries"][0]["spans"]
    return [(LOG[s["start"] : s["end"]], s["grade"]) for s in spans if s["grade"]]


SPLIT = {
    "query_id": "q1",
    "doc": "log",
    "span": NUGGET,
    "nuggets": [{"quote": "No extra fee:", "grade": 1}, {"quote": FEE, "grade": 3}],
    "why": "two facts",
}
CHAIN = {
    "query_id": "q1",
    "doc": "log",
    "span": FEE,
    "nuggets": [
        {"quote": "the $45 cleaning fee is per stay,", "grade": 2},
        {"quote": "not per pet.", "grade": 3},
    ],
    "why": "split further",
}


def test_a_chain_of_splits_applies_once_and_again_changes_nothing(tmp_path: Path) -> None:
    folder = write_suite(tmp_path / "s", "1.1", region_and_nugget())
    assert apply(folder, [SPLIT, CHAIN]) == 2
    after = (folder / "suite.json").read_text()
    want = [("No extra fee:", 1), ("the $45 cleaning fee is per stay,", 2), ("not per pet.", 3)]
    assert nuggets(folder) == want
    # Without the chain rule the first decision would look unapplied (its 3-nugget is gone)
    # and fail on its vanished span; with it, replaying changes nothing.
    assert apply(folder, [SPLIT, CHAIN]) == 0
    assert (folder / "suite.json").read_text() == after


def test_a_decision_on_a_nugget_not_in_the_suite_is_refused(tmp_path: Path) -> None:
    folder = write_suite(tmp_path / "s", "1.1", region_and_nugget())
    with pytest.raises(InputError, match="no nugget of log in q1 reads"):
        apply(folder, [CHAIN])


def test_a_dropped_query_keeps_its_decisions_and_only_it_is_skipped(tmp_path: Path) -> None:
    folder = write_suite(tmp_path / "s", "1.1", region_and_nugget())
    gone = {**SPLIT, "query_id": "q9"}
    with pytest.raises(InputError, match="unknown query 'q9'"):
        apply(folder, [gone])
    assert apply(folder, [gone, SPLIT, {"query_id": "q9", "dropped": "taken out"}]) == 1
    assert nuggets(folder) == [("No extra fee:", 1), (FEE, 3)]
    with pytest.raises(InputError, match="'q1' is dropped but still in the suite"):
        apply(folder, [{"query_id": "q1", "dropped": "not really"}])
