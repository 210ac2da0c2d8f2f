"""Agreement between a suite's grades and an independent second assessor's pass.

The second assessor grades a sample of the suite's judged (query, target) pairs from the query and
the target text alone, never seeing the first grades; its sheet (CSV or JSONL, `query_id`,
`target_id`, `grade`, read and checked by `core.curation.judging`) is compared with the suite: raw
agreement, Cohen's kappa with linear and quadratic weights (scikit-learn), binary kappa at
grade >= 1 and >= 2, and the 4x4 confusion table.

Disagreements are resolved by a rule (`RULES`). The default, `lower`, keeps the lower of the two
grades: a pair counts as relevant only as far as both assessors agree it is, so no measure credits
a system for a target one careful reader found less useful. A resolution is not applied where it
would break the suite's rules: the query's `primary` must keep the highest grade, so when the
rule would leave it below another target (or at 0) it keeps the higher of its two grades; a
non-primary target that the rule would raise above the primary (or to >= 1 in an edge query)
keeps its first grade. Both are listed as exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from rageval_pipeline.core.curation.judging import graded_rows
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage.warehouse import write_text
from rageval_pipeline.core.suites.golden import Suite

Rule = Literal["lower", "first", "second"]
RULES: tuple[Rule, ...] = ("lower", "first", "second")
GRADES = (0, 1, 2, 3)
BINARY = (False, True)


def kappa(
    first: Sequence[object],
    second: Sequence[object],
    weights: Literal["linear", "quadratic"] | None = None,
    labels: Sequence[object] = GRADES,
) -> float | None:
    """Cohen's kappa of two graders over the same items (scikit-learn), None when undefined
    (both graders used one and the same label throughout). `labels` fixes the scale, so that
    weights measure the distance on it (1 and 3 are two steps apart even when no 2 occurs)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(first) | set(second)) < 2:
        return None
    return float(cohen_kappa_score(first, second, labels=list(labels), weights=weights))


class Disagreement(BaseModel):
    query_id: str
    target_id: str
    first: int  # the suite's grade
    second: int
    resolved: int  # the grade the suite keeps
    rule: Rule
    exception: str | None = None  # why the rule's grade was not applied


class Figures(BaseModel):
    """How far two passes' grades of the same pairs agree."""

    pairs: int
    agree: int
    kappa_linear: float | None
    kappa_quadratic: float | None
    kappa_relevant: float | None  # binary, grade >= 1
    kappa_highly: float | None  # binary, grade >= 2
    confusion: list[list[int]]  # [first grade][second grade]

    @property
    def raw(self) -> float:
        return self.agree / self.pairs


def figures(first: Sequence[int], second: Sequence[int]) -> Figures:
    """Raw agreement, the kappas and the confusion table of two passes' grades, pair by pair."""
    confusion = [[0] * len(GRADES) for _ in GRADES]
    for a, b in zip(first, second, strict=True):
        confusion[a][b] += 1
    return Figures(
        pairs=len(first),
        agree=sum(a == b for a, b in zip(first, second, strict=True)),
        kappa_linear=kappa(first, second, "linear"),
        kappa_quadratic=kappa(first, second, "quadratic"),
        kappa_relevant=kappa([a >= 1 for a in first], [b >= 1 for b in second], labels=BINARY),
        kappa_highly=kappa([a >= 2 for a in first], [b >= 2 for b in second], labels=BINARY),
        confusion=confusion,
    )


class Report(Figures):
    suite_pairs: int  # judged (query, target) pairs in the suite
    rule: Rule
    disagreements: list[Disagreement]
    second_pass: list[tuple[str, str, int]]  # (query id, target id, grade), sheet order

    @property
    def share(self) -> float:
        return self.pairs / self.suite_pairs

    def changes(self) -> dict[tuple[str, str], int]:
        """The grades to write: resolved grades that differ from the suite's."""
        return {
            (d.query_id, d.target_id): d.resolved
            for d in self.disagreements
            if d.resolved != d.first
        }


def _resolve(rule: Rule, first: int, second: int) -> int:
    return {"lower": min(first, second), "first": first, "second": second}[rule]


def compare(suite: Suite, sheet: Path, rule: Rule = "lower") -> Report:
    """Compare a second pass with the suite's grades and resolve the disagreements by `rule`.
    Every row must grade a pair the suite judges (one InputError naming the line otherwise)."""
    judged = {q.id: dict(q.qrels) for q in suite.queries}
    second_pass: list[tuple[str, str, int]] = []
    for row in graded_rows(suite, sheet):
        if row.grade is None:
            raise InputError(
                sheet, "missing: a second pass must grade every row", line=row.line, field="grade"
            )
        if row.target_id not in judged[row.query_id]:
            problem = f"{row.query_id} {row.target_id} has no grade in the suite to compare with"
            raise InputError(sheet, problem, line=row.line, field="target_id")
        second_pass.append((row.query_id, row.target_id, row.grade))
    if not second_pass:
        raise InputError(sheet, "no graded rows")
    first = [judged[q][t] for q, t, _ in second_pass]
    second = [g for _, _, g in second_pass]
    disagreements = [
        Disagreement(
            query_id=q, target_id=t, first=a, second=g, resolved=_resolve(rule, a, g), rule=rule
        )
        for (q, t, g), a in zip(second_pass, first, strict=True)
        if a != g
    ]
    _keep_valid(suite, disagreements)
    return Report(
        **figures(first, second).model_dump(),
        suite_pairs=sum(len(q.qrels) for q in suite.queries),
        rule=rule,
        disagreements=disagreements,
        second_pass=second_pass,
    )


def _keep_valid(suite: Suite, disagreements: list[Disagreement]) -> None:
    """Undo resolutions that would leave a query's primary without the highest grade."""
    by_query: dict[str, list[Disagreement]] = {}
    for d in disagreements:
        by_query.setdefault(d.query_id, []).append(d)
    for query in suite.queries:
        mine = {d.target_id: d for d in by_query.get(query.id, [])}
        if not mine:
            continue
        grades = dict(query.qrels) | {t: d.resolved for t, d in mine.items()}
        primary = query.primary_id
        if primary in mine and (grades[primary] == 0 or grades[primary] < max(grades.values())):
            d = mine[primary]
            d.resolved = grades[primary] = max(d.first, d.second)
            d.exception = "primary: keeps the higher grade so that it stays top-graded"
        top = grades[primary] if primary else 0
        for target, d in mine.items():
            if target != primary and d.resolved > top:
                d.resolved = d.first
                d.exception = "keeps the first grade: the rule's grade would exceed the primary's"


def record(report: Report, suite: Suite, directory: Path) -> tuple[Path, Path]:
    """Write the second pass (query id, query, target id, grade) and the disagreements (first,
    second, resolved, rule, exception) as JSONL into `directory`, each file atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    text_of = {q.id: q.query for q in suite.queries}
    second = directory / "second_pass.jsonl"
    rows = [
        {"query_id": q, "query": text_of[q], "target_id": t, "grade": g}
        for q, t, g in report.second_pass
    ]
    write_text(second, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    disagreements = directory / "disagreements.jsonl"
    write_text(disagreements, "".join(d.model_dump_json() + "\n" for d in report.disagreements))
    return second, disagreements
