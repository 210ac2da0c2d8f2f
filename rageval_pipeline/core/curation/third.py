"""A second judging pass compared with the suite, and the third reading that decides where they
disagree (`rageval pool agree`, and the re-judging of the shipped suites in
`scripts/evidence_judging.py`).

The suite's grade of a (query, target) pair is the first reading; its evidence is the text of the
target's spans graded >= 1 (the whole target when it is judged whole). The second pass is a
judging sheet (`core.curation.judging`: `query_id`, `target_id`, `grade`, and optionally
`evidence` quotes) that grades a sample of the suite's judged pairs blind. The two are compared
by `readings.compare_passes`: kappas, confusion, and the evidence F1 when the sheet quotes.

Neither reading wins a disagreement by rule (keeping the lower grade keeps the first judge's
errors): a third reader sees the query, the target's text and the two readings in an order drawn
per row from a recorded seed, with no judge names, and decides the grade and the quotes. The
key (which reading is which pass) is kept apart from the sheet, with the record.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from rageval_pipeline.core.curation.judging import GradedRow, graded_rows
from rageval_pipeline.core.curation.quotes import of_target
from rageval_pipeline.core.curation.readings import Pair, Reading, RoundReport, compare_passes
from rageval_pipeline.core.curation.sheets import jsonl, write_rows
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.suites.golden import Suite
from rageval_pipeline.core.suites.queries import Query

# The third reader's sheet, left to right: the query, the target, the two readings, the decision.
COLUMNS = (
    "query_id",
    "query",
    "target_id",
    "target_text",
    "reading_1_grade",
    "reading_1_evidence",
    "reading_2_grade",
    "reading_2_evidence",
    "grade",
    "evidence",
)
KEY_FILE = "third_key.json"


def target_text(suite: Suite, target: str) -> str:
    doc, start, end, _ = suite.reference.extent_of(target)
    return suite.reference.texts[doc][start:end]


def quote_texts(suite: Suite, target: str, offsets: list[tuple[int, int]] | None) -> list[str]:
    """The quoted texts of a sheet row's evidence (character offsets in the target's document)."""
    text = suite.reference.texts[suite.reference.extent_of(target).doc_id]
    return [text[a:b] for a, b in offsets or []]


def suite_reading(suite: Suite, query: Query, target: str) -> Reading:
    """The suite's judgment of a pair as a reading: its grade, and as evidence the text of
    the target's spans graded >= 1 (a target judged whole: its whole text)."""
    grade = dict(query.qrels)[target]
    quotes = []
    if grade >= 1 and query.spans:
        texts, spans = suite.reference.texts, query.evidence
        quotes = [
            texts[e.doc_id][e.start : e.end]
            for e, g in (spans[i] for i in of_target(query, target))
            if g >= 1
        ]
    if grade >= 1 and not quotes:
        quotes = [target_text(suite, target)]
    return Reading(query_id=query.id, target=target, grade=grade, evidence=quotes, judge="suite")


def compare(suite: Suite, sheet: Path) -> RoundReport:
    """The second pass of `sheet` compared with the suite, pair by pair. Every row must grade a
    pair the suite judges (one InputError naming sheet, line and field otherwise). The evidence
    F1 is measured when the sheet quotes (a row with `evidence` quotes)."""
    queries = {q.id: q for q in suite.queries}
    judged = {q.id: dict(q.qrels) for q in suite.queries}
    second: list[Reading] = []
    quotes = False
    for row in graded_rows(suite, sheet):
        if row.grade is None:
            raise InputError(
                sheet, "missing: a second pass must grade every row", line=row.line, field="grade"
            )
        if row.target_id not in judged[row.query_id]:
            problem = f"{row.query_id} {row.target_id} has no grade in the suite to compare with"
            raise InputError(sheet, problem, line=row.line, field="target_id")
        quotes = quotes or bool(row.evidence)  # an empty `evidence` column quotes nothing
        evidence = quote_texts(suite, row.target_id, row.evidence)
        second.append(
            Reading(query_id=row.query_id, target=row.target_id, grade=row.grade, evidence=evidence)
        )
    if not second:
        raise InputError(sheet, "no graded rows")
    first = {r.key: suite_reading(suite, queries[r.query_id], r.target) for r in second}
    if not quotes:  # grades alone: the suite's quotes would tell the third reader which is which
        first = {k: r.model_copy(update={"evidence": []}) for k, r in first.items()}
    texts = {r.target: target_text(suite, r.target) for r in second}
    return compare_passes(first, second, texts, evidence=quotes)


def swapped(seed: int, scope: str, query_id: str, target: str) -> bool:
    """Whether the blind sheet shows the second reading first: drawn per row from the seed and
    the pair, so that a sheet written again keeps each row's order."""
    return random.Random(f"{seed}:{scope}:{query_id}:{target}").random() < 0.5


def blind_rows(suite: Suite, pairs: Sequence[Pair], seed: int) -> tuple[list[dict], dict[str, str]]:
    """The third reader's rows of the disagreements of `suite` (COLUMNS, the decision left
    empty) and the key: "query|target" -> the pass shown as reading 1 ("first" or "second")."""
    queries = {q.id: q.query for q in suite.queries}
    texts = {p.target: target_text(suite, p.target) for p in pairs}
    rows, key = [], {}
    for pair in pairs:
        swap = swapped(seed, suite.name, pair.query_id, pair.target)
        one, two = (pair.second, pair.first) if swap else (pair.first, pair.second)
        key[f"{pair.query_id}|{pair.target}"] = "second" if swap else "first"
        rows.append(
            {
                "query_id": pair.query_id,
                "query": queries[pair.query_id],
                "target_id": pair.target,
                "target_text": texts[pair.target],
                "reading_1_grade": one.grade,
                "reading_1_evidence": one.evidence,
                "reading_2_grade": two.grade,
                "reading_2_evidence": two.evidence,
                "grade": "",
                "evidence": [],
            }
        )
    return rows, key


def write_blind(
    suite: Suite, report: RoundReport, sheet: Path, record: Path, seed: int
) -> tuple[int, Path]:
    """Write the blind sheet of the report's disagreements (CSV or JSONL by extension) and its
    key into the record folder: (rows written, key file)."""
    rows, key = blind_rows(suite, report.disagreements, seed)
    write_rows(rows, sheet, COLUMNS)
    record.mkdir(parents=True, exist_ok=True)
    note = "reading_1 of each row is the pass named here (first: the suite; second: the sheet)"
    keep = {"seed": seed, "scope": suite.name, "sheet": str(sheet), "reading_1": key, "note": note}
    write_text(record / KEY_FILE, json.dumps(keep, indent=1) + "\n")
    return len(rows), record / KEY_FILE


def decisions(suite: Suite, sheet: Path, report: RoundReport) -> dict[tuple[str, str], GradedRow]:
    """The third reader's decided rows, keyed by pair: every disagreement decided once (its
    quotes located in the target's text as `pool merge` locates them). A row that is not a
    disagreement, or left undecided, refuses the sheet in one line."""
    open_pairs = {(p.query_id, p.target) for p in report.disagreements}
    decided: dict[tuple[str, str], GradedRow] = {}
    for row in graded_rows(suite, sheet):
        key = (row.query_id, row.target_id)
        if key not in open_pairs:
            problem = f"{row.query_id} {row.target_id} is not a disagreement of this second pass"
            raise InputError(sheet, problem, line=row.line, field="target_id")
        if row.grade is None:
            problem = "undecided: the third reading must grade every disagreement"
            raise InputError(sheet, problem, line=row.line, field="grade")
        decided[key] = row
    missing = [k for k in sorted(open_pairs) if k not in decided]
    if missing:
        problem = f"{len(missing)} disagreement(s) have no row, first {missing[0][0]} "
        raise InputError(sheet, problem + missing[0][1], field="target_id")
    return decided


def record(
    suite: Suite,
    report: RoundReport,
    directory: Path,
    decided: Mapping[tuple[str, str], GradedRow] | None = None,
) -> list[Path]:
    """Write into `directory`: the second pass, and each disagreement with both readings, their
    evidence F1 and (with `decided`) the third reading's grade and quotes, as JSONL; the
    agreement figures as JSON. Each file atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    queries = {q.id: q.query for q in suite.queries}
    second = [
        {"query_id": p.query_id, "query": queries[p.query_id], "target_id": p.target}
        | _reading(p.second)
        for p in report.compared
    ]
    rows = []
    for p in report.disagreements:
        row = {"query_id": p.query_id, "query": queries[p.query_id], "target_id": p.target}
        row |= {"first": _reading(p.first), "second": _reading(p.second)}
        row["evidence_f1"] = p.evidence_f1
        if decided is not None:
            chosen = decided[p.query_id, p.target]
            quotes = quote_texts(suite, p.target, chosen.evidence)
            row["third"] = {"grade": chosen.grade, "evidence": quotes}
        rows.append(row)
    figures = report.model_dump(exclude={"compared"}) | {"raw": report.raw}
    files = {
        "second_pass.jsonl": jsonl(second),
        "disagreements.jsonl": jsonl(rows),
        "agreement.json": json.dumps(figures, indent=1) + "\n",
    }
    for name, text in files.items():
        write_text(directory / name, text)
    return [directory / name for name in files]


def _reading(r: Reading) -> dict:
    return {"grade": r.grade, "evidence": r.evidence}
