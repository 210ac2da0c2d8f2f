"""Quote-level judgments on a judging sheet: the `evidence` column.

A graded row may carry `evidence`, the exact quotes of its target's text that make it
relevant (a JSON list of strings; in a CSV sheet, that list written as JSON in the cell). Each
quote is located in the target's text, whitespace aside (`core.suites.spans.locate_quote`),
and the row is stored as spans (docs/suite-format.md, "Evidence inside a judged target"): the
whole target as the judged region, grade 0, and every quote as an evidence span with the
row's grade. A quote that is not in the target's text, or is there more than once, refuses
the sheet in one line naming its line and the quote.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.evidence import Evidence, Reference, span_entry
from rageval_pipeline.core.suites.queries import Query
from rageval_pipeline.core.suites.spans import QuoteError, locate_quote, span_sha256

Quoted = list[tuple[int, int]]  # the quotes' [start, end) in the target's document


def quoted(
    reference: Reference, target: str, row: dict[str, Any], grade: int | None, where: tuple
) -> Quoted | None:
    """The offsets of a row's `evidence` quotes in its target's document: None when the sheet
    has no `evidence`, [] when the row quotes nothing (its whole target is graded, as a row
    without the column, but a whole document may then be graded in a query judged by spans).
    `where`: (sheet, line) for the one-line refusal."""
    sheet, line = where
    if "evidence" not in row:
        return None
    value = row["evidence"]
    if isinstance(value, str):  # a CSV cell
        if not value.strip():
            return []
        with contextlib.suppress(json.JSONDecodeError):  # refused below: not a list
            value = json.loads(value)
    if value is None or value == []:
        return []
    if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
        problem = 'must be a JSON list of quotes (["first quote", "second quote"])'
        raise InputError(Path(sheet), problem, line=line, field="evidence")
    if grade == 0:
        problem = "a grade 0 names no evidence: leave it empty"
        raise InputError(Path(sheet), problem, line=line, field="evidence")
    doc, start, end, _ = reference.extent_of(target)
    out = []
    for index, quote in enumerate(value):
        try:
            out.append(locate_quote(reference.texts[doc], quote, start, end))
        except QuoteError as error:
            problem = f"{error} of {target}"
            raise InputError(Path(sheet), problem, line=line, field=f"evidence[{index}]") from None
    return out


def target_spans(reference: Reference, target: str, grade: int, quotes: Quoted | None) -> list:
    """The spans that store a graded target: its whole text with the grade, or, with quotes,
    its whole text as the judged region (grade 0) and each quote with the grade."""
    region = reference.extent_of(target)
    if not quotes:
        return [span_entry(region, grade=grade)]
    text = reference.texts[region.doc_id]
    places = list(dict.fromkeys(quotes))  # a place quoted twice is one span
    quoted_spans = [
        span_entry(Evidence(region.doc_id, a, b, span_sha256(text, a, b)), grade=grade)
        for a, b in places
    ]
    whole = (region.start, region.end) in places  # every sentence of the target is evidence
    return quoted_spans if whole else [span_entry(region, grade=0), *quoted_spans]


def of_target(query: Query, target: str) -> list[int]:
    """The indexes of the query's spans that store `target`: those naming the reference chunk
    (a chunk target), or lying in the document (a whole-document target)."""
    return [
        index
        for index, (evidence, _) in enumerate(query.evidence)
        if target in (query.span_target(index), evidence.doc_id)
    ]
