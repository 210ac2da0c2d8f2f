"""The judged pairs of a suite read at nugget level, and a uniform stratified draw of them for a
second reader.

A judged pair is a query and one judged region of it (a reference section, or a whole document
judged as one entity): the span of grade 0 over the target's whole text. The suite's reading of
the pair is the nuggets inside that region (quote, grade, decisive words) and its grade, the
highest nugget grade (0 when the region holds none).

The draw is uniform within each stratum: pairs holding a nugget (grade >= 1) and pairs without.
Its seed is fixed before the draw, with each stratum's population (size and a digest of its
sorted pair keys), so the draw is reproduced from the record and checked against it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field, model_validator

from rageval_pipeline.core.suites.golden import Suite

NUGGETS, NONE = "nuggets", "none"
STRATA = {NUGGETS: "pairs the suite grades >= 1 (a nugget inside)", NONE: "pairs it grades 0"}


class Nugget(BaseModel):
    """One quoted fact of a pair: exact text of the target, its grade, its decisive words."""

    quote: str = Field(min_length=1)
    grade: int = Field(ge=1, le=3)
    decisive: str | None = None


class PairReading(BaseModel):
    """One reader's reading of a judged pair: the grade is the highest nugget grade."""

    query_id: str
    target_id: str
    grade: int = Field(ge=0, le=3)
    nuggets: list[Nugget] = []
    why: str = ""  # the reader's reason, by the rubric

    @model_validator(mode="after")
    def _grade_is_best_nugget(self) -> PairReading:
        best = max((n.grade for n in self.nuggets), default=0)
        if self.grade != best:
            raise ValueError(f"grade {self.grade} is not the highest nugget grade ({best})")
        return self

    @property
    def key(self) -> tuple[str, str]:
        return self.query_id, self.target_id

    @property
    def stratum(self) -> str:
        return NUGGETS if self.grade >= 1 else NONE


class Stratum(BaseModel):
    """A stratum of the draw: its rule, its population and how many of it are drawn."""

    rule: str
    population: int
    sample: int
    population_sha256: str  # of its sorted "query_id\ttarget_id" lines


class SeedRecord(BaseModel):
    """What is fixed before the draw (`drawn_at` is filled by the draw itself)."""

    suite: str
    seed: int
    unit: str
    strata: dict[str, Stratum]
    recorded_at: str
    drawn_at: str | None = None


def target_of(suite: Suite, query_index: int, span_index: int) -> str:
    """The target a judged region names: the document when the region is its whole text (an
    entity judged as one), else its reference section."""
    query = suite.queries[query_index]
    evidence = query.evidence[span_index][0]
    whole = suite.reference.extent_of(evidence.doc_id)
    if (whole.start, whole.end) == (evidence.start, evidence.end):
        return evidence.doc_id
    return query.span_target(span_index)


def suite_readings(suite: Suite) -> list[PairReading]:
    """The suite's reading of each judged pair, in query and span order."""
    texts = suite.reference.texts
    out = []
    for qi, query in enumerate(suite.queries):
        for si, (region, grade) in enumerate(query.evidence):
            if grade != 0 or not query.spans:
                continue
            nuggets = [
                Nugget(
                    quote=texts[e.doc_id][e.start : e.end],
                    grade=g,
                    decisive=query.spans[i].decisive,
                )
                for i, (e, g) in enumerate(query.evidence)
                if g >= 1
                and e.doc_id == region.doc_id
                and region.start <= e.start
                and e.end <= region.end
            ]
            out.append(
                PairReading(
                    query_id=query.id,
                    target_id=target_of(suite, qi, si),
                    grade=max((n.grade for n in nuggets), default=0),
                    nuggets=nuggets,
                )
            )
    return out


def population_digest(pairs: Sequence[PairReading]) -> str:
    lines = sorted(f"{p.query_id}\t{p.target_id}" for p in pairs)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def by_stratum(pairs: Sequence[PairReading]) -> dict[str, list[PairReading]]:
    """Each stratum's pairs, sorted by key so that the draw depends on the seed alone."""
    out: dict[str, list[PairReading]] = {name: [] for name in STRATA}
    for pair in sorted(pairs, key=lambda p: p.key):
        out[pair.stratum].append(pair)
    return out


def strata(pairs: Sequence[PairReading], sizes: Mapping[str, int]) -> dict[str, Stratum]:
    return {
        name: Stratum(
            rule=STRATA[name],
            population=len(members),
            sample=sizes[name],
            population_sha256=population_digest(members),
        )
        for name, members in by_stratum(pairs).items()
    }


class DrawError(ValueError):
    """The population is not the one the seed was recorded for."""


def draw(pairs: Sequence[PairReading], record: SeedRecord) -> list[PairReading]:
    """The drawn pairs in the order a reader reads them: a uniform sample without replacement
    of each stratum (strata in `STRATA` order, one generator seeded by `record.seed`), then
    shuffled together so that the order tells nothing of the stratum."""
    rng = random.Random(record.seed)
    drawn: list[PairReading] = []
    for name, members in by_stratum(pairs).items():
        want = record.strata[name]
        if (len(members), population_digest(members)) != (want.population, want.population_sha256):
            raise DrawError(f"stratum {name!r}: the population differs from the seed record")
        drawn.extend(rng.sample(members, want.sample))
    rng.shuffle(drawn)
    return drawn
