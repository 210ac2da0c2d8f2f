"""LLM-suggested relevance labels for a judging sheet, and their agreement with human grades.

A judging sheet (`rageval pool`) is JSONL, one (query, target) pair a line: `query_id`,
`query`, `target_id`, `doc_id`/`start`/`end` (the chunk's span), `target_text`, `systems` (the
systems that retrieved it, with ranks),
`grade` (the human grade, empty until judged); other columns are kept as they are.
`suggest` adds `suggested_grade` (0-3, null when the output was unparseable), `suggested_by`
(provider:model), `suggested_raw` and `suggested_agreement`; it never writes `grade`: a
suggestion becomes a judgment only through a human's review (`rageval pool merge` reads
`grade` alone).

Agreement with existing human grades: Cohen's weighted kappa (quadratic weights, scikit-learn)
on the pairs graded by both, and Kendall's tau (scipy) between the system rankings the two
label sets give. A system's score is its mean DCG over queries, computed on the pooled targets
it retrieved at the ranks the pool recorded (`systems`: "bm25@3 dense@1").
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rageval_pipeline.core.curation.agreement import kappa
from rageval_pipeline.core.curation.sheets import grade_of, jsonl
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import prompts
from rageval_pipeline.core.generation.llm import LLM, agreement
from rageval_pipeline.core.generation.verdicts import GRADE, parse_grade
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.suites.loaders import jsonl_rows


class SheetRow(BaseModel):
    model_config = ConfigDict(extra="allow")  # keep any column the pool tool adds (best_rank)

    query_id: str
    query: str
    target_id: str
    target_text: str
    # The target's span as `rageval pool` writes it: the chunk's characters [start, end) of
    # document doc_id (offsets None for a whole document); a suggestion grades that span.
    doc_id: str | None = None
    start: int | None = Field(None, ge=0)
    end: int | None = Field(None, ge=0)
    systems: str | list[str] = ""  # `rageval pool` writes "bm25@3 dense@1"
    grade: int | None = Field(None, ge=0, le=3)
    suggested_grade: int | None = Field(None, ge=0, le=3)
    suggested_by: str | None = None
    suggested_raw: list[str] | None = None
    suggested_agreement: float | None = None

    @field_validator("grade", mode="before")
    @classmethod
    def _grade(cls, value):
        return grade_of(value, text=False)

    def ranks(self) -> dict[str, int | None]:
        """System -> the rank at which it retrieved this target (None when not recorded)."""
        names = (
            self.systems if isinstance(self.systems, list) else re.split(r"[\s,]+", self.systems)
        )
        out: dict[str, int | None] = {}
        for item in filter(None, names):
            name, _, rank = item.partition("@")
            out[name] = int(rank) if rank.isdigit() else None
        return out


class Agreement(BaseModel):
    pairs: int  # pairs with a human grade and a parseable suggestion
    kappa_quadratic: float | None
    systems: list[str]
    human_scores: list[float]
    llm_scores: list[float]
    kendall_tau: float | None


def read_sheet(path: Path) -> list[SheetRow]:
    """The rows of a JSONL judging sheet (`loaders.jsonl_rows`: bounded, a regular file),
    each checked as a SheetRow, its grade by the rule every sheet reader shares
    (`sheets.grade_of`); one InputError naming line and field otherwise."""
    rows = []
    for number, obj in jsonl_rows(path, "file_bytes"):
        try:
            rows.append(SheetRow.model_validate(obj))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            raise InputError(path, message, line=number, field=field) from None
    return rows


def write_sheet(path: Path, rows: list[SheetRow]) -> None:
    write_text(path, jsonl(rows))


def suggest(
    rows: list[SheetRow], llm: LLM, *, samples: int = 1, unjudged_only: bool = False
) -> list[SheetRow]:
    """Rows with suggestions added for every pair (or, `unjudged_only`, those without a
    human grade); the human `grade` is never changed."""
    todo = [i for i, r in enumerate(rows) if not (unjudged_only and r.grade is not None)]
    outputs = llm.complete_all(
        [prompts.RELEVANCE.format(query=rows[i].query, passage=rows[i].target_text) for i in todo],
        samples,
        GRADE,
    )
    out = list(rows)
    for i, completions in zip(todo, outputs, strict=True):
        grades = [parse_grade(c.text) for c in completions]
        (top, count), *_ = Counter(grades).most_common(1)
        out[i] = rows[i].model_copy(
            update=dict(
                suggested_grade=top if count * 2 > len(grades) else None,
                suggested_by=llm.label,
                suggested_raw=[c.text for c in completions],
                suggested_agreement=agreement(grades),
            )
        )
    return out


def system_scores(rows: list[SheetRow], label: str) -> dict[str, float]:
    """Mean over queries of each system's DCG over its pooled targets, at the ranks the pool
    recorded (undiscounted where no rank was recorded)."""
    gain: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    queries = sorted({r.query_id for r in rows})
    for r in rows:
        for system, rank in r.ranks().items():
            gain[system][r.query_id] += getattr(r, label) / math.log2(1 + (rank or 1))
    return {s: sum(g[q] for q in queries) / len(queries) for s, g in sorted(gain.items())}


def agreement_with_humans(rows: list[SheetRow]) -> Agreement:
    """Kappa and Kendall's tau over the pairs holding both a human grade and a suggestion."""
    from scipy.stats import kendalltau

    both = [r for r in rows if r.grade is not None and r.suggested_grade is not None]
    weighted = kappa([r.grade for r in both], [r.suggested_grade for r in both], "quadratic")
    human, llm = system_scores(both, "grade"), system_scores(both, "suggested_grade")
    systems = sorted(human)
    tau = None
    if len(systems) >= 2:
        value = kendalltau([human[s] for s in systems], [llm[s] for s in systems]).statistic
        tau = None if value != value else float(value)  # NaN when a ranking is all ties
    return Agreement(
        pairs=len(both),
        kappa_quadratic=weighted,
        systems=systems,
        human_scores=[human[s] for s in systems],
        llm_scores=[llm[s] for s in systems],
        kendall_tau=tau,
    )
