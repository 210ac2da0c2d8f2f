"""How far a second reader's nugget-level reading of drawn pairs agrees with the suite's.

Per pair, the grades (the highest nugget grade) are compared as in `agreement`: raw agreement,
the kappas, the confusion table, per stratum of the draw and weighted to the population (each
pair by the inverse of its stratum's sampling fraction among the pairs read).

Per nugget, the two readings' nuggets of one pair are matched by the tokens they cover in the
target's text (whitespace tokens, `readings.evidence_tokens`, as spans are measured): the
candidate (suite, reader) couples are taken in decreasing number of shared tokens (file order
among equals), each nugget at most once, and a couple is a match when it shares at least
`MATCH_SHARE` of the shorter nugget's tokens. On the matches: grade agreement (raw, within
one, linear kappa); the rest are unmatched nuggets, counted by grade on each side. Nugget
boundaries: precision, recall and F1 of the reader's nugget tokens against the suite's, micro
over the pairs (summed over them), and the nugget-level F1 of the matching.

A pair disagrees, and goes to a third reading, when its grades differ, a matched nugget's
grades differ, or a nugget of grade >= `UNMATCHED_GRADE` has no match on either side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ValidationError

from rageval_pipeline.core.curation.agreement import Figures, Weighted, figures, kappa
from rageval_pipeline.core.curation.agreement import weighted_figures as weigh
from rageval_pipeline.core.curation.draw import PairReading
from rageval_pipeline.core.curation.readings import evidence_tokens
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.loaders import jsonl_rows
from rageval_pipeline.core.suites.spans import quote_places

# A couple of nuggets is one fact quoted twice when it shares at least this share of the
# shorter one's tokens: a reader trimming or extending a sentence keeps the match, two
# neighbouring sentences do not make one.
MATCH_SHARE = 0.5
# An unmatched nugget this grade or above is a disagreement (a missed or extra part of the answer).
UNMATCHED_GRADE = 2
NUGGET_GRADES = (1, 2, 3)


def tokens_of(text: str, reading: PairReading) -> list[set[int]]:
    """The token positions of `text` each nugget of the reading covers."""
    return [evidence_tokens(text, [n.quote]) for n in reading.nuggets]


def match(ours: Sequence[set[int]], theirs: Sequence[set[int]]) -> list[tuple[int, int]]:
    """The one-to-one matches (index in `ours`, index in `theirs`), by the rule of the module."""
    couples = sorted(
        ((len(a & b), i, j) for i, a in enumerate(ours) for j, b in enumerate(theirs)),
        key=lambda c: (-c[0], c[1], c[2]),
    )
    used_ours: set[int] = set()
    used_theirs: set[int] = set()
    out = []
    for shared, i, j in couples:
        if i in used_ours or j in used_theirs or not shared:
            continue
        if shared >= MATCH_SHARE * min(len(ours[i]), len(theirs[j])):
            out.append((i, j))
            used_ours.add(i)
            used_theirs.add(j)
    return sorted(out)


class Compared(BaseModel):
    """One pair read twice: the suite's reading, the reader's, how their nuggets match."""

    stratum: str
    suite: PairReading
    reader: PairReading
    matches: list[tuple[int, int]]
    suite_tokens: int  # tokens the suite's nuggets cover
    reader_tokens: int
    shared_tokens: int

    def unmatched(self, side: str) -> list[int]:
        """The grades of the nuggets of `side` ("suite" or "reader") without a match."""
        reading = self.suite if side == "suite" else self.reader
        taken = {m[0] if side == "suite" else m[1] for m in self.matches}
        return [n.grade for k, n in enumerate(reading.nuggets) if k not in taken]

    @property
    def matched_grades(self) -> list[tuple[int, int]]:
        ours, theirs = self.suite.nuggets, self.reader.nuggets
        return [(ours[i].grade, theirs[j].grade) for i, j in self.matches]

    @property
    def disagrees(self) -> bool:
        return (
            self.suite.grade != self.reader.grade
            or any(a != b for a, b in self.matched_grades)
            or any(g >= UNMATCHED_GRADE for g in self.unmatched("suite") + self.unmatched("reader"))
        )


def compare_pair(text: str, stratum: str, suite: PairReading, reader: PairReading) -> Compared:
    ours, theirs = tokens_of(text, suite), tokens_of(text, reader)
    every_ours, every_theirs = set().union(*ours), set().union(*theirs)
    return Compared(
        stratum=stratum,
        suite=suite,
        reader=reader,
        matches=match(ours, theirs),
        suite_tokens=len(every_ours),
        reader_tokens=len(every_theirs),
        shared_tokens=len(every_ours & every_theirs),
    )


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None or precision + recall == 0:
        return None
    return 2 * precision * recall / (precision + recall)


class NuggetFigures(BaseModel):
    """Per-nugget agreement and nugget boundaries over a set of pairs."""

    suite_nuggets: int
    reader_nuggets: int
    matched: int
    grade_raw: float | None  # matched nuggets given the same grade
    grade_within_one: float | None
    grade_kappa_linear: float | None
    unmatched_suite: dict[int, int]  # grade -> suite nuggets the reader has no match for
    unmatched_reader: dict[int, int]
    token_precision: float | None  # of the reader's nugget tokens, against the suite's
    token_recall: float | None
    token_f1: float | None
    nugget_precision: float | None  # matched / reader nuggets
    nugget_recall: float | None  # matched / suite nuggets
    nugget_f1: float | None


def _unmatched(pairs: Sequence[Compared], side: str) -> dict[int, int]:
    return {g: sum(p.unmatched(side).count(g) for p in pairs) for g in NUGGET_GRADES}


def nugget_figures(pairs: Sequence[Compared]) -> NuggetFigures:
    graded = [g for p in pairs for g in p.matched_grades]
    ours, theirs = [a for a, _ in graded], [b for _, b in graded]
    suite_n = sum(len(p.suite.nuggets) for p in pairs)
    reader_n = sum(len(p.reader.nuggets) for p in pairs)
    shared = sum(p.shared_tokens for p in pairs)
    precision = _ratio(shared, sum(p.reader_tokens for p in pairs))
    recall = _ratio(shared, sum(p.suite_tokens for p in pairs))
    n_precision, n_recall = _ratio(len(graded), reader_n), _ratio(len(graded), suite_n)
    return NuggetFigures(
        suite_nuggets=suite_n,
        reader_nuggets=reader_n,
        matched=len(graded),
        grade_raw=_ratio(sum(a == b for a, b in graded), len(graded)),
        grade_within_one=_ratio(sum(abs(a - b) <= 1 for a, b in graded), len(graded)),
        grade_kappa_linear=kappa(ours, theirs, "linear", NUGGET_GRADES) if graded else None,
        unmatched_suite=_unmatched(pairs, "suite"),
        unmatched_reader=_unmatched(pairs, "reader"),
        token_precision=precision,
        token_recall=recall,
        token_f1=_f1(precision, recall),
        nugget_precision=n_precision,
        nugget_recall=n_recall,
        nugget_f1=_ratio(2 * len(graded), suite_n + reader_n),
    )


class StratumFigures(BaseModel):
    stratum: str
    population: int
    drawn: int
    read: int
    grades: Figures | None
    nuggets: NuggetFigures | None


class Agreement(BaseModel):
    """The agreement of a round: per stratum, over all pairs read, and weighted."""

    match_share: float
    pairs_read: int
    strata: list[StratumFigures]
    grades: Figures  # over the pairs read, unweighted
    weighted: Weighted  # each pair weighed by its stratum's population / pairs read
    nuggets: NuggetFigures
    disagreements: int


def _grades(pairs: Sequence[Compared]) -> Figures:
    return figures([p.suite.grade for p in pairs], [p.reader.grade for p in pairs])


def agreement(
    pairs: Sequence[Compared], population: Mapping[str, int], drawn: Mapping[str, int]
) -> Agreement:
    """The figures of the compared pairs; `population` and `drawn`: stratum -> pairs."""
    strata = []
    weight: dict[str, float] = {}
    for name, size in population.items():
        mine = [p for p in pairs if p.stratum == name]
        weight[name] = size / len(mine) if mine else 0.0
        strata.append(
            StratumFigures(
                stratum=name,
                population=size,
                drawn=drawn[name],
                read=len(mine),
                grades=_grades(mine) if mine else None,
                nuggets=nugget_figures(mine) if mine else None,
            )
        )
    return Agreement(
        match_share=MATCH_SHARE,
        pairs_read=len(pairs),
        strata=strata,
        grades=_grades(pairs),
        weighted=weigh(
            [p.suite.grade for p in pairs],
            [p.reader.grade for p in pairs],
            [weight[p.stratum] for p in pairs],
        ),
        nuggets=nugget_figures(pairs),
        disagreements=sum(p.disagrees for p in pairs),
    )


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


GRADE_CELLS = ("raw", "kappa_linear", "kappa_quadratic", "kappa_relevant", "kappa_highly")
NUGGET_CELLS = ("grade_raw", "grade_within_one", "grade_kappa_linear", "token_f1", "nugget_f1")


def _cells(grades: Figures | Weighted | None, nugget: NuggetFigures | None) -> str:
    g = [getattr(grades, k) if grades else None for k in GRADE_CELLS]
    n = [getattr(nugget, k) if nugget else None for k in NUGGET_CELLS]
    return " | ".join(map(_n, g + n))


def table(found: Agreement) -> list[str]:
    """The figures as a Markdown table (one row per stratum, all pairs unweighted and weighted
    to the population), the confusion table and the unmatched nuggets."""
    drawn = sum(s.drawn for s in found.strata)
    population = sum(s.population for s in found.strata)
    rows = [(s.stratum, s.population, s.drawn, s.read, s.grades, s.nuggets) for s in found.strata]
    rows.append(
        ("all, unweighted", population, drawn, found.pairs_read, found.grades, found.nuggets)
    )
    rows.append(
        (
            "all, weighted to the population",
            population,
            drawn,
            found.pairs_read,
            found.weighted,
            None,
        )
    )
    return [
        f"Nuggets match when they share at least {found.match_share:g} of the shorter one's "
        "tokens (one-to-one, most shared first).",
        "",
        "| pairs | population | drawn | read | raw | κ linear | κ quadratic | κ ≥1 | κ ≥2 |"
        " nugget grade raw | within one | nugget κ linear | token F1 | nugget F1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {_cells(r[4], r[5])} |" for r in rows),
        "",
        "Pair grades over the pairs read (rows: the suite's grade 0-3, columns: the reader's):",
        "",
        *(f"    {row}" for row in found.grades.confusion),
        "",
        f"Unmatched nuggets by grade: the suite's {found.nuggets.unmatched_suite}, the "
        f"reader's {found.nuggets.unmatched_reader}. Pairs sent to a third reading: "
        f"{found.disagreements}.",
        "",
    ]


def read_readings(
    path: Path, texts: Mapping[tuple[str, str], str], full: bool = True
) -> dict[tuple[str, str], PairReading]:
    """A reader's sheet of pairs (`query_id`, `target_id`, `grade`, `nuggets`, other fields
    kept by the reader ignored): pair -> reading. `texts`: the pairs the sheet may read, each
    with its target text. A row left ungraded (no grade, no nuggets) is a pair not read; with
    `full` that refuses the sheet. One InputError naming the line and field for a pair not
    drawn or read twice, a grade that is not the highest nugget grade, a quote not in the
    target's text or decisive words not in their quote."""
    out: dict[tuple[str, str], PairReading] = {}
    for line, row in jsonl_rows(path, "file_bytes"):
        if row.get("grade") in (None, "") and not row.get("nuggets"):
            if full:
                raise InputError(path, "missing: every pair is read", line=line, field="grade")
            continue
        try:
            reading = PairReading.model_validate(row)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(map(str, first["loc"])) or "grade"
            message = first["msg"].removeprefix("Value error, ")
            raise InputError(path, message, line=line, field=field) from None
        if reading.key not in texts:
            problem = f"{reading.query_id} {reading.target_id} is not a pair of this sheet"
            raise InputError(path, problem, line=line, field="target_id")
        if reading.key in out:
            raise InputError(path, "this pair is read twice", line=line, field="target_id")
        text = texts[reading.key]
        for k, nugget in enumerate(reading.nuggets):
            where = f"nuggets[{k}]"
            if not quote_places(text, nugget.quote):
                problem = f"quote {nugget.quote[:60]!r} is not in the target's text"
                raise InputError(path, problem, line=line, field=f"{where}.quote")
            if nugget.decisive and not quote_places(nugget.quote, nugget.decisive):
                problem = f"decisive {nugget.decisive[:60]!r} is not in its quote"
                raise InputError(path, problem, line=line, field=f"{where}.decisive")
        out[reading.key] = reading
    return out
