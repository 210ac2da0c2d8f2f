"""Judging sheets: the pool written out for an assessor, and the graded sheet merged back.

A sheet is CSV or JSON Lines (by extension: `.csv`, `.jsonl`), one row per (query, target),
rows grouped by query (then best rank): query_id, query, excerpt (the passage trimmed around the
query's words), grade, target_id, doc_id, start, end, systems, best_rank, target_text (whole).
The assessor fills `grade` (0-3) from the query and the passage alone; `systems` and
`best_rank` say where the row came from and are not to be looked at while grading.
`start`/`end` are the chunk's character offsets in document `doc_id` (empty for a
whole-document target): merging refuses a row whose offsets are no longer the chunk's (its
document changed since the sheet was written), and stores the grade as that evidence span in a
query judged by spans, and in a query without judgments of a suite judged by spans
(docs/suite-format.md); a query still written with chunk-id judgments keeps them (`rageval
spans convert` converts it). A row may quote its evidence (an `evidence` column, `quotes`):
its target is then stored as its judged region and the quoted evidence spans inside it.
Merging checks every row before anything is written (one line
naming sheet, line and field on the first bad row), never replaces an existing judgment unless
asked, validates the merged suite as `rageval validate` does (near-duplicates graded
differently are listed with their sheet lines), then replaces the suite file atomically.

The sheet files themselves (CSV or JSONL, escaping) are `core.curation.sheets`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rageval_pipeline.core.curation.pool import suite_level
from rageval_pipeline.core.curation.quotes import Quoted, of_target, quoted, target_spans
from rageval_pipeline.core.curation.rewrite import rewrite_suite
from rageval_pipeline.core.curation.sheets import grade_cell, read_rows
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.chunk_ids import split_chunk_id
from rageval_pipeline.core.suites.consistency import inconsistencies
from rageval_pipeline.core.suites.golden import Suite, load_suite
from rageval_pipeline.core.suites.matching import TargetError, resolve_target


class Conflict(BaseModel):
    line: int
    query_id: str
    target_id: str
    judged: int
    sheet: int
    quoted: bool = False  # the sheet quotes its evidence: its spans would be replaced

    def describe(self, sheet: Path) -> str:
        return (
            f"{sheet}:{self.line}: {self.query_id} {self.target_id}: "
            f"judged {self.judged}, sheet says {self.sheet}"
            + (" with evidence quotes" if self.quoted else "")
        )


class MergeResult(BaseModel):
    added: int = 0
    unchanged: int = 0  # rows repeating an existing judgment
    overwritten: int = 0
    skipped: int = 0  # rows with an empty grade
    conflicts: list[Conflict] = []
    # Near-duplicate targets the merged suite would grade differently (what `rageval validate`
    # refuses), each naming the sheet line, query and section: nothing is written then.
    inconsistent: list[str] = []
    lines: dict[tuple[str, str], int] = {}  # (query id, resolved target) -> sheet line
    quotes: dict[tuple[str, str], list[tuple[int, int]]] = {}  # its evidence quotes' offsets


class GradedRow(BaseModel):
    """A checked row of a graded sheet: its line, query, resolved target and grade."""

    line: int
    query_id: str
    target_id: str  # resolved
    grade: int | None  # None when the assessor left it empty
    evidence: Quoted | None = None  # its quotes' offsets in the document (`quotes`)


def graded_rows(suite: Suite, sheet: Path) -> Iterator[GradedRow]:
    """Every row of a graded sheet, checked against the suite: a known query, a target at the
    query's level, no (query, target) graded twice, a grade 0-3 or empty. The first bad row
    raises one InputError naming sheet, line and field."""
    queries = {q.id: q for q in suite.queries}
    counts = suite.reference.chunk_counts
    default_level = suite_level(suite)  # for queries with no judgment yet
    seen: dict[tuple[str, str], int] = {}
    for line, row in read_rows(sheet):
        query_id = str(row.get("query_id") or "")
        if query_id not in queries:
            problem = f"unknown query {query_id!r}"
            raise InputError(sheet, problem, line=line, field="query_id")
        query = queries[query_id]
        target = str(row.get("target_id") or "")
        try:
            resolved, _ = resolve_target(target, counts, suite.match)
        except TargetError as error:
            raise InputError(sheet, str(error), line=line, field="target_id") from None
        level = query.level if query.qrels else default_level
        grade = grade_cell(row.get("grade"), sheet, line)
        evidence = quoted(suite.reference, resolved, row, grade, (sheet, line))
        if evidence and level == "document" and query.judgments:
            problem = f"quotes need spans: query {query_id} is judged by whole documents"
            raise InputError(sheet, problem, line=line, field="evidence")
        if evidence is None and (split_chunk_id(resolved) is not None) != (level == "chunk"):
            problem = f"{target!r} is not a {level} id; query {query_id} is judged by {level}"
            raise InputError(sheet, problem, line=line, field="target_id")
        key = (query_id, resolved)
        if key in seen:
            problem = f"{query_id} {resolved} is graded again (first at line {seen[key]})"
            raise InputError(sheet, problem, line=line, field="target_id")
        seen[key] = line
        _check_offsets(suite, row, resolved, sheet, line)
        yield GradedRow(
            line=line, query_id=query_id, target_id=resolved, grade=grade, evidence=evidence
        )


def _check_offsets(suite: Suite, row: dict[str, Any], chunk: str, sheet: Path, line: int) -> None:
    """A row's `start`/`end`, when given, must still be its chunk's offsets in the text."""
    given = [row.get(field) for field in ("start", "end")]
    if all(v is None or (isinstance(v, str) and not v.strip()) for v in given):
        return  # a whole-document target, or a sheet written before offsets
    if split_chunk_id(chunk) is None:
        raise InputError(sheet, "a document target has no offsets", line=line, field="start")
    span = suite.reference.span_of(chunk)
    try:
        start, end = (int(v) for v in given)
    except (TypeError, ValueError):
        problem = f"offsets must be integers (got {json.dumps(given[0])}, {json.dumps(given[1])})"
        raise InputError(sheet, problem, line=line, field="start") from None
    if (start, end) != (span.start, span.end):
        problem = (
            f"offsets {start}-{end} are not {chunk}'s ({span.start}-{span.end}): its document "
            "changed since the sheet was written; pool it again"
        )
        raise InputError(sheet, problem, line=line, field="start")


def plan_merge(
    suite: Suite, rows: Iterable[GradedRow]
) -> tuple[dict[tuple[str, str], int], MergeResult]:
    """The grades of a graded sheet's rows (`graded_rows`) to write, keyed by (query id,
    resolved target id), and what merging them would do (`result.quotes`: the offsets of the
    rows' evidence quotes). Quotes for a judged target replace its spans: a conflict, as a
    different grade is."""
    judged = {q.id: dict(q.qrels) for q in suite.queries}
    grades: dict[tuple[str, str], int] = {}
    result = MergeResult()
    for row in rows:
        if row.grade is None:
            result.skipped += 1
            continue
        key = (row.query_id, row.target_id)
        result.lines[key] = row.line
        if row.evidence:
            result.quotes[key] = row.evidence
        existing = judged[row.query_id].get(row.target_id)
        if existing == row.grade and not row.evidence:
            result.unchanged += 1
            continue
        if existing is not None:
            result.conflicts.append(
                Conflict(
                    line=row.line,
                    query_id=row.query_id,
                    target_id=row.target_id,
                    judged=existing,
                    sheet=row.grade,
                    quoted=bool(row.evidence),
                )
            )
        else:
            result.added += 1
        grades[key] = row.grade
    return grades, result


def merge_sheet(suite_file: Path, sheet: Path, *, overwrite: bool = False) -> MergeResult:
    """Merge a graded sheet into the suite file. Conflicts (a different grade for a judged
    target) stop the merge unless `overwrite`; the caller lists them. Nothing is written when
    any row is bad, a conflict stands, or the merged suite would not validate (as `rageval
    validate` checks it: near-duplicates graded differently are listed in `inconsistent`)."""
    suite = load_suite(suite_file)
    return merge_rows(suite_file, suite, sheet, graded_rows(suite, sheet), overwrite=overwrite)


def merge_rows(
    suite_file: Path,
    suite: Suite,
    sheet: Path,
    rows: Iterable[GradedRow],
    *,
    overwrite: bool = False,
    move_primary: bool = False,
) -> MergeResult:
    """`merge_sheet` of rows read already: `suite` is `suite_file` loaded, `rows` the sheet's
    `graded_rows`, `sheet` the file their lines are in. A caller that has read them (`pool
    agree --third --write`, its decisions) passes them on rather than reading the sheet again.
    A primary regraded below another target is refused unless `move_primary` (a third reading
    decided it)."""
    grades, result = plan_merge(suite, rows)
    if result.conflicts and not overwrite:
        return result
    result.overwritten, result.conflicts = len(result.conflicts), []

    def refuse(merged: Suite) -> list[str]:
        out = []
        for item in inconsistencies(merged):
            line = result.lines.get((item.query_id, item.target_id))
            line = line or result.lines.get((item.query_id, item.other_id))
            where = f"{sheet}:{line}" if line else str(suite_file)
            out.append(f"{where}: {item.problem}")
        return out

    result.inconsistent = _write_grades(
        suite_file, suite, grades, refuse, result.quotes, move_primary=move_primary
    )
    return result


def _write_grades(
    suite_file: Path,
    suite: Suite,
    grades: dict[tuple[str, str], int],
    refuse: Callable[[Suite], list[str]],
    quotes: dict[tuple[str, str], Quoted],
    *,
    move_primary: bool,
) -> list[str]:
    """Set the grades keyed by (query id, resolved target id) in the suite file (see
    `rewrite.rewrite_suite`), with the evidence `quotes` of those that have them (spans:
    `quotes.target_spans`); nothing is written when there are none."""
    if not grades:
        return []
    queries = {q.id: q for q in suite.queries}
    # A query not judged yet follows the suite; a suite not judged yet is judged by spans,
    # which survive edits of its documents (docs/suite-format.md).
    by_spans = any(q.spans for q in suite.queries) or not any(q.judgments for q in suite.queries)

    def edit(raw_queries: dict[str, dict[str, Any]]) -> None:
        dropped: dict[str, set[int]] = {}
        added: dict[str, list[dict[str, Any]]] = {}
        for (query_id, resolved), grade in grades.items():
            query, raw = queries[query_id], raw_queries[query_id]
            if query.spans or (by_spans and not query.judgments):
                mine, quoted_here = of_target(query, resolved), quotes.get((query_id, resolved))
                if len(mine) == 1 and quoted_here is None:  # one span: regraded in place
                    raw["spans"][mine[0]]["grade"] = grade
                    continue
                dropped.setdefault(query_id, set()).update(mine)
                spans = target_spans(suite.reference, resolved, grade, quoted_here)
                added.setdefault(query_id, []).extend(spans)
                continue
            # Keep the spelling of an existing target (a suffix-matched id stays as written).
            written = {r: t for t, (r, _) in zip(query.judgments, query.qrels, strict=True)}
            judgments = raw.setdefault("judgments", {})
            judgments[written.get(resolved, resolved)] = grade
        for query_id, spans in added.items():
            kept = raw_queries[query_id].get("spans") or []
            drop = dropped[query_id]
            raw_queries[query_id]["spans"] = [
                *(span for i, span in enumerate(kept) if i not in drop),
                *spans,
            ]
        for query_id in {query_id for query_id, _ in grades}:
            _mark_primary(raw_queries[query_id], move_primary)

    return rewrite_suite(suite_file, edit, refuse)


def _mark_primary(raw: dict[str, Any], move: bool) -> None:
    """A query judged for the first time names its primary target: the first of its highest
    grade. A query that names one keeps it; with `move`, only while it keeps the highest grade
    (otherwise validation refuses the suite)."""
    spans, judgments = raw.get("spans") or [], raw.get("judgments") or {}
    grades = [s["grade"] for s in spans] or list(judgments.values())
    best = max(grades, default=0)
    marked = [s for s in spans if s.get("primary")]
    below = any(s["grade"] < best for s in marked) or judgments.get(raw.get("primary"), best) < best
    if move and below:
        for span in marked:  # regraded below another target: the primary moves
            del span["primary"]
        raw.pop("primary", None)
    elif raw.get("primary") or marked:
        return
    if best < 1:
        return
    if spans:
        first = next(s for s in spans if s["grade"] == best)
        first.update(primary=True)
        first["sha256"] = first.pop("sha256")  # the hash stays last, as span_entry writes it
    else:
        raw["primary"] = next(t for t, g in judgments.items() if g == best)
