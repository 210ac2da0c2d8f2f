"""Evidence-level judging passes: readings of (query, target) pairs, and how two passes agree.

A reading is one assessor's judgment of one target of a query: a grade 0-3 and the evidence,
exact quotes of the target's text (whitespace aside, `core.suites.spans.locate_quote`) that
make it relevant; a pass is JSON Lines of readings, each stamped with its assessor (`judge`),
the time it was appended (`graded_at`, UTC) and its place in the pass (`order`), which is what
shows that two passes were made apart.

Two passes agree on a pair as far as their grades do (raw agreement, Cohen's kappas and the
confusion table of `agreement.figures`) and, where both grade it >= 1, as far as their
evidence does: the F1 of the whitespace tokens (`core.suites.derived`) their quotes cover in
the target's text. A pair disagrees when the grades differ or that F1 is below `LOW_OVERLAP`:
the two readings then name different text as the answer, and a third reading decides it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator

from rageval_pipeline.core.curation.agreement import GRADES, Figures, figures
from rageval_pipeline.core.curation.sheets import grade_of
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.chunking import TOKEN
from rageval_pipeline.core.suites.loaders import jsonl_rows
from rageval_pipeline.core.suites.spans import QuoteError, quote_places

# Below this token F1, two readings of one pair quote mostly different text as the evidence.
LOW_OVERLAP = 0.5


class Reading(BaseModel):
    """One assessor's judgment of one (query, target) pair."""

    query_id: str
    target: str
    grade: int
    evidence: list[str] = []
    note: str = ""
    new: bool = False  # a target the suite had not judged relevant before
    judge: str = ""
    graded_at: str = ""  # UTC, ISO 8601, when the row was appended
    order: int = 0  # its place in its judge's file, from 1
    chose: str | None = None  # a third reading: which reading it agreed with

    @field_validator("grade", mode="before")
    @classmethod
    def _grade(cls, value: object) -> int:
        """The grade rule of every sheet (`sheets.grade_of`); a reading has one."""
        if (grade := grade_of(value, text=False)) is None:
            raise ValueError("must be 0, 1, 2 or 3 (got nothing)")
        return grade

    @property
    def key(self) -> tuple[str, str]:
        return self.query_id, self.target


def read_pass(path: Path) -> list[Reading]:
    """The readings of a JSONL pass file, in file order; one InputError naming the line for a
    row that is not a reading, a grade outside 0-3 or a pair read twice."""
    rows: list[Reading] = []
    seen: dict[tuple[str, str], int] = {}
    for line, obj in jsonl_rows(path, "file_bytes"):
        try:
            reading = Reading.model_validate(obj)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(map(str, first["loc"]))
            message = first["msg"].removeprefix("Value error, ")
            raise InputError(path, message, line=line, field=field) from None
        if reading.grade not in GRADES:
            raise InputError(path, "must be 0, 1, 2 or 3", line=line, field="grade")
        if reading.key in seen:
            problem = f"{reading.query_id} {reading.target} is read again (first at line "
            problem += f"{seen[reading.key]})"
            raise InputError(path, problem, line=line, field="target")
        seen[reading.key] = line
        rows.append(reading)
    return rows


def evidence_tokens(text: str, quotes: Iterable[str]) -> set[int]:
    """The positions of the whitespace tokens of `text` the quotes cover (a token counts when
    a quote shares a character with it). A quote found in several places covers them all (the
    judges' tool checked that a quote is in the text, not that it is there once); one not in
    the text raises `spans.QuoteError`."""
    tokens = [m.span() for m in TOKEN.finditer(text)]
    covered: set[int] = set()
    for quote in quotes:
        places = quote_places(text, quote)
        if not places:
            raise QuoteError(f"quote {quote[:60]!r} is not in the text")
        for start, end in places:
            covered.update(i for i, (a, b) in enumerate(tokens) if a < end and b > start)
    return covered


def token_f1(one: set[int], other: set[int]) -> float:
    """F1 of two token sets: 2 |shared| / (|one| + |other|); 1 when both are empty."""
    if not one and not other:
        return 1.0
    return 2 * len(one & other) / (len(one) + len(other))


class Pair(BaseModel):
    """A sampled pair with both readings and, when both grade it >= 1, their evidence F1."""

    query_id: str
    target: str
    first: Reading
    second: Reading
    evidence_f1: float | None = None

    @property
    def disagrees(self) -> bool:
        low = self.evidence_f1 is not None and self.evidence_f1 < LOW_OVERLAP
        return self.first.grade != self.second.grade or low


class RoundReport(Figures):
    """Agreement of a second pass with the first on the pairs both read."""

    both_relevant: int  # pairs both passes grade >= 1
    mean_f1: float | None  # mean evidence F1 over them
    low_overlap: int  # of them, evidence F1 < LOW_OVERLAP
    compared: list[Pair]

    @property
    def disagreements(self) -> list[Pair]:
        return [p for p in self.compared if p.disagrees]


def compare_passes(
    first: Mapping[tuple[str, str], Reading],
    second: Sequence[Reading],
    texts: Mapping[str, str],
    evidence: bool = True,
) -> RoundReport:
    """Compare the second pass's readings with the first's, pair by pair (`first` holds a
    reading for every pair of `second` to compare; the caller leaves out pairs the first pass
    has not read yet). `texts`: target id -> the text the quotes are located in. Without
    `evidence` (a pass that quotes nothing) the grades alone are compared."""
    pairs = []
    for reading in second:
        one = first[reading.key]
        f1 = None
        if evidence and one.grade >= 1 and reading.grade >= 1:
            text = texts[reading.target]
            f1 = token_f1(
                evidence_tokens(text, one.evidence), evidence_tokens(text, reading.evidence)
            )
        pairs.append(
            Pair(
                query_id=reading.query_id,
                target=reading.target,
                first=one,
                second=reading,
                evidence_f1=f1,
            )
        )
    overlaps = [p.evidence_f1 for p in pairs if p.evidence_f1 is not None]
    return RoundReport(
        **figures([p.first.grade for p in pairs], [p.second.grade for p in pairs]).model_dump(),
        both_relevant=len(overlaps),
        mean_f1=sum(overlaps) / len(overlaps) if overlaps else None,
        low_overlap=sum(f < LOW_OVERLAP for f in overlaps),
        compared=pairs,
    )


class PassStamp(BaseModel):
    """When and in what order one assessor of a pass graded: the independence record."""

    judge: str
    rows: int
    first_graded_at: str
    last_graded_at: str
    first_order: int
    last_order: int
    queries_in_order: list[str]  # query ids in the order they were first graded


def stamps(readings: Sequence[Reading]) -> list[PassStamp]:
    """One stamp per judge of a pass, in the order the judges first appear."""
    by_judge: dict[str, list[Reading]] = {}
    for reading in readings:
        by_judge.setdefault(reading.judge, []).append(reading)
    return [
        PassStamp(
            judge=judge,
            rows=len(rows),
            first_graded_at=min(r.graded_at for r in rows),
            last_graded_at=max(r.graded_at for r in rows),
            first_order=min(r.order for r in rows),
            last_order=max(r.order for r in rows),
            queries_in_order=list(dict.fromkeys(r.query_id for r in sorted(rows, key=_when))),
        )
        for judge, rows in by_judge.items()
    ]


def _when(reading: Reading) -> tuple[str, int]:
    return reading.graded_at, reading.order
