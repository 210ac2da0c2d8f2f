"""Judging sheets as files: CSV or JSON Lines (by extension: `.csv`, `.jsonl`), one row per
(query, target), read and written with their line numbers for one-line errors; and every JSON
Lines record of the curation (`jsonl`: the readings, the agreement records).

A CSV sheet is opened in a spreadsheet, and corpus text is often crawled or customer text: a
cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return would run as a formula on the
assessor's machine. Such a cell is written with a `'` before it (OWASP's rule for CSV injection),
and so is a cell that itself starts with `'`; reading a sheet back removes exactly that one
quote, from cells that start with `'` and then one of those characters, so every text
round-trips unchanged (`escape_cell`, `unescape_cell`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rageval_pipeline.core.curation.pool import PoolEntry
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.bounds import read_bytes
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.suites.loaders import jsonl_rows

# Read left to right by an assessor: the query, the passage around its words, the grade to
# fill; then what the merge needs and what is not to be looked at while grading.
COLUMNS = (
    "query_id",
    "query",
    "excerpt",
    "grade",
    "target_id",
    "doc_id",
    "start",
    "end",
    "systems",
    "best_rank",
    "target_text",
)
SHEET_SUFFIXES = (".csv", ".jsonl")
_GRADE_RULE = "must be 0, 1, 2 or 3"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets read as a formula
_ESCAPED_START = (*_FORMULA_START, "'")  # a leading quote too, so that reading back is exact
# A line as `open(newline="")` gives csv one, found lazily in the text: a StringIO of the text
# would hold 4 bytes a character (a 64 MiB sheet: 256 MB more).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def escape_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: `'` before a formula start or a quote."""
    if isinstance(value, str) and value.startswith(_ESCAPED_START):
        return "'" + value
    return value


def unescape_cell(value: object) -> object:
    """The text `escape_cell` was given: one `'` removed when an escaped character follows."""
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(_ESCAPED_START):
        return value[1:]
    return value


def sheet_kind(path: Path) -> str:
    if path.suffix not in SHEET_SUFFIXES:
        raise InputError(path, "a judging sheet must end in .csv or .jsonl")
    return path.suffix


def write_sheet(entries: list[PoolEntry], path: Path) -> None:
    """The pool as a judging sheet, grade left empty."""
    write_rows([{**e.model_dump(), "grade": ""} for e in entries], path, COLUMNS)


def write_rows(rows: list[dict[str, Any]], path: Path, columns: tuple[str, ...]) -> None:
    """Rows as a sheet, CSV or JSONL by the path's extension. In CSV an empty cell stands for
    None (a document's offsets) and a list (evidence quotes) is written as JSON."""
    if sheet_kind(path) == ".jsonl":
        text = jsonl(rows)
    else:
        buffer = io.StringIO()
        # CRLF line ends (RFC 4180, as spreadsheets write): csv quotes a cell holding a
        # character of the line end only, and a CR inside a text must be quoted too.
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows({k: escape_cell(_cell(v)) for k, v in row.items()} for row in rows)
        text = buffer.getvalue()
    write_text(path, text)


def jsonl(rows: Iterable[BaseModel | dict[str, Any]]) -> str:
    """Rows as JSON Lines, the one writer of them (`loaders.jsonl_rows` the one reader): a
    model by its fields (pydantic's compact JSON), a dict as given (`json.dumps`, text kept
    as UTF-8). The records under data/suites/*/agreement were written so, byte for byte."""
    return "".join(
        (r.model_dump_json() if isinstance(r, BaseModel) else json.dumps(r, ensure_ascii=False))
        + "\n"
        for r in rows
    )


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else value


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number where the row starts, row) of a sheet: the one reading of a judging sheet
    (`pool merge`, `pool agree`, `label --human`). A regular file within the size limits
    (`io.bounds`); a CSV row with more cells than the header is refused, not cut."""
    if sheet_kind(path) == ".jsonl":
        yield from jsonl_rows(path, "file_bytes")
        return
    try:
        # Bytes, not read_text: its newline translation would turn a `\r` inside a cell into
        # `\n`. A byte order mark (spreadsheets save one) is dropped.
        text = read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    except ValueError as exc:
        raise InputError(path, str(exc)) from None
    reader = csv.DictReader(m[0] for m in _LINE.finditer(text))
    start = 1
    try:
        columns = reader.fieldnames or []
        missing = [c for c in ("query_id", "target_id", "grade") if c not in columns]
        if missing:
            raise InputError(path, "missing column in the header", line=1, field=missing[0])
        start = reader.line_num + 1
        for row in reader:
            if None in row:  # csv's key for the cells past the header's
                extra = len(row[None])
                problem = f"{extra} cell(s) past the header's {len(columns)} columns"
                raise InputError(path, problem, line=start)
            yield start, {k: unescape_cell(v) for k, v in row.items()}
            start = reader.line_num + 1
    except csv.Error as error:  # e.g. a field past csv's size limit
        problem = f"not readable as CSV ({error})"
    else:
        return
    raise InputError(path, problem, line=start)  # (outside the except: nothing chained)


def grade_of(value: Any, *, text: bool) -> int | None:
    """The one rule for a grade cell: None when left empty (no value, or only whitespace);
    in a CSV sheet (`text`) exactly one of the characters 0-3, in JSON Lines a JSON integer
    0-3. Anything else is refused, alike on every path that reads a sheet: `true`, `2.0`,
    `"3"` in JSON, ` 1` with a space. ValueError otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if text and isinstance(value, str) and value in ("0", "1", "2", "3"):
        return int(value)
    if not text and type(value) is int and 0 <= value <= 3:
        return value
    raise ValueError(f"{_GRADE_RULE} (got {json.dumps(value)})")


def grade_cell(value: Any, path: Path, line: int) -> int | None:
    """The grade of a row of the sheet `path` (`grade_of`); InputError naming the line."""
    try:
        return grade_of(value, text=path.suffix == ".csv")
    except ValueError as exc:
        raise InputError(path, str(exc), line=line, field="grade") from None
