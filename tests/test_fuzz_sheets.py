"""Fuzzing the judging sheet (core/curation/judging.py), as test_fuzz_readers.py does the readers:
any text written to a CSV sheet comes back exactly and no cell starts as a formula; whatever
the bytes of a graded sheet, merging it is an InputError or a merge, never another error.
RAGEVAL_FUZZ_EXAMPLES sets the number of examples (default 200)."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.curation import judging, sheets
from rageval_pipeline.core.curation.pool import PoolEntry
from rageval_pipeline.core.errors import InputError

EXAMPLES = int(os.environ.get("RAGEVAL_FUZZ_EXAMPLES") or 200)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SUITE = Path(__file__).parent / "fixtures" / "pool" / "poolsuite"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Text as a corpus holds it (UTF-8: no lone surrogates), leaning on what a sheet finds hard.
TEXT = st.text(
    st.characters(exclude_categories=("Cs",)) | st.sampled_from([*FORMULA_STARTS, "'", '"', ","]),
    max_size=12,
)


@FUZZ
@given(cells=st.lists(st.tuples(TEXT, TEXT, TEXT, TEXT, TEXT, st.integers(1, 100)), max_size=4))
def test_any_text_round_trips_and_no_cell_starts_as_a_formula(tmp_path, cells):
    entries = [
        PoolEntry(
            query_id=q, query=text, target_id=t, target_text=target, systems=s, best_rank=rank
        )
        for q, text, t, target, s, rank in cells
    ]
    sheet = tmp_path / "sheet.csv"
    sheets.write_sheet(entries, sheet)
    with sheet.open(newline="", encoding="utf-8") as f:
        written = [c for row in csv.reader(f) for c in row]
    assert not [c for c in written if c.startswith(FORMULA_STARTS)]
    back = [row for _, row in sheets.read_rows(sheet)]
    assert back == [
        {**{k: "" if v is None else str(v) for k, v in e.model_dump().items()}, "grade": ""}
        for e in entries
    ]


@pytest.mark.parametrize("value", ["'", "''", "'x", "'=", "x'=", "'\t1", "=1", "-", ""])
def test_escaping_is_undone_exactly(value):
    assert sheets.unescape_cell(sheets.escape_cell(value)) == value


ROWS = [
    ["Q1", "q", "tokens:chunk:0", "text", "bm25@1", "1", "1"],
    ["Q1", "q", "tokens:chunk:2", "text", "bm25@2", "2", ""],
    ["Q2", "q", "limits:chunk:0", "text", "bm25@2", "2", "2"],
]
NASTY = ["'", "''", "'-", "=1+1", "-1", "@SUM(A1)", "\t", "\r", '"', "'2", "2'", "\x00", "\ufeff"]


@st.composite
def graded_sheets(draw) -> bytes:
    """A graded CSV sheet with a few cells replaced, rows cut or repeated, or bytes flipped."""
    rows = [list(r) for r in ROWS]
    for _ in range(draw(st.integers(0, 4))):
        row = draw(st.integers(0, len(rows) - 1))
        edit = draw(st.sampled_from(["cell", "prefix", "cut", "repeat"]))
        if edit in ("cell", "prefix"):
            if not rows[row]:
                continue
            at = draw(st.integers(0, len(rows[row]) - 1))
            value = draw(st.sampled_from(NASTY) | st.text(max_size=3))
            rows[row][at] = value + rows[row][at] if edit == "prefix" else value
        elif edit == "cut":
            rows[row] = rows[row][: draw(st.integers(0, len(rows[row])))]
        else:
            rows.append(list(rows[row]))
    lines = [",".join(sheets.COLUMNS)] + [
        ",".join(f'"{c}"' if draw(st.booleans()) else c for c in r) for r in rows
    ]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        pos = draw(st.integers(0, len(data) - 1))
        data = data[:pos] + draw(st.binary(min_size=0, max_size=2)) + data[pos + 1 :]
    return data


@pytest.fixture(scope="module")
def suite_copy(tmp_path_factory) -> Path:
    return Path(shutil.copytree(SUITE, tmp_path_factory.mktemp("sheets") / "poolsuite"))


@FUZZ
@given(data=graded_sheets() | st.binary(max_size=300))
def test_merging_any_sheet_is_a_merge_or_one_line(tmp_path, suite_copy, data):
    suite_file = suite_copy / "suite.json"
    original = suite_file.read_bytes()
    sheet = tmp_path / "graded.csv"
    sheet.write_bytes(data)
    try:
        result = judging.merge_sheet(suite_file, sheet)
    except InputError as error:
        assert error.path in (str(sheet), str(suite_file))
        assert "\n" not in str(error)
        assert suite_file.read_bytes() == original  # a refused merge writes nothing
        return
    finally:
        merged = suite_file.read_bytes()
        suite_file.write_bytes(original)
    if result.conflicts or not (result.added or result.overwritten):  # nothing to write
        assert merged == original
