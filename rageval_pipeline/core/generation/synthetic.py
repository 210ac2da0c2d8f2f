"""Synthetic queries: LLM-written queries from sampled passages, InPars style.

Units are the suite's judging targets: reference chunks for a chunk-level suite, documents
otherwise, of at least `MIN_UNIT_WORDS` words (a heading alone asks nothing). A seeded shuffle
of the units is drawn in order, cycling with the next sample number (another seed) once every
unit is used, so the first n draws are the same whatever n. Each reply must be one line of at
most `MAX_QUERY_CHARS` characters holding a letter; anything else is counted as unparseable.

Kept are the queries that are
- not near-duplicates: their normalised text (NFKC, case-folded, punctuation to spaces) equals
  no earlier query's (the suite's own, then the synthetic ones kept so far) and their token
  Jaccard with each is below `JACCARD`; and
- found again: their source unit is in the top `ROUND_TRIP_DEPTH` of at least one of the
  round-trip systems (Promptagator's round-trip filter).

The result is a companion query set beside the suite (`<suite>.synthetic.jsonl`), never the
suite file: every row is marked `synthetic` and records its source, model and prompt hash.
A seeded uniform sample of it, recorded with its frame in `sample.json` (`statistics/sampling.py`:
version, seed, size, frame), is what humans judge: PPI needs the human-judged queries to be a
random sample of the population estimated.
"""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rageval_pipeline.core.curation.pool import suite_level
from rageval_pipeline.core.curation.sheets import jsonl
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import prompts
from rageval_pipeline.core.generation.config import GenerationError
from rageval_pipeline.core.generation.llm import LLM, prompt_hash
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.statistics.sampling import HumanSample, draw_sample
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.suites.chunking import StoredChunks, chunks_of
from rageval_pipeline.core.suites.golden import Suite
from rageval_pipeline.core.suites.loaders import jsonl_rows, suite_tables

MIN_UNIT_WORDS = 20
MAX_QUERY_CHARS = 300
JACCARD = 0.8
ROUND_TRIP_DEPTH = 20
_LETTER = re.compile(r"[^\W\d_]")
_NON_WORD = re.compile(r"[\W_]+")


class SyntheticQuery(BaseModel):
    """One row of the companion file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^\S+$")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    synthetic: Literal[True] = True
    source_id: str  # the judging target (chunk or document id) it was written from
    model: str  # provider:model
    prompt_hash: str  # SHA-256 of the prompt template
    sample: int = Field(ge=0)  # the seed offset of the request
    round_trip: dict[str, int]  # system -> rank at which it retrieved the source


class SynthReport(BaseModel):
    drawn: int
    unparseable: int
    duplicates: int
    not_found_again: int
    kept: int

    def describe(self) -> str:
        """Why queries were dropped, by count."""
        return (
            f"{self.kept} synthetic queries kept of {self.drawn} drawn ({self.unparseable} "
            f"unparseable, {self.duplicates} near-duplicates, {self.not_found_again} not found "
            f"again in the top {ROUND_TRIP_DEPTH})"
        )


class Unit(BaseModel):
    target_id: str
    text: str


def units(suite: Suite, stored_chunks: StoredChunks | None = None) -> list[Unit]:
    """The suite's judging targets with at least MIN_UNIT_WORDS words, in corpus order.
    `stored_chunks`: the corpus chunked by a chunking, as the caller has it stored (the
    pipeline's `<system>/chunks`; `chunks_of`)."""
    corpus = suite_tables(suite).corpus
    if suite_level(suite) == "chunk":
        table = chunks_of(corpus, suite.chunking, stored_chunks)
        pairs = zip(table["chunk_id"], table["text"], strict=True)
    else:
        pairs = zip(corpus["doc_id"], corpus["text"], strict=True)
    return [Unit(target_id=t, text=x) for t, x in pairs if len(x.split()) >= MIN_UNIT_WORDS]


def draws(pool: list[Unit], n: int, seed: int) -> list[tuple[Unit, int]]:
    """n (unit, sample number) draws: a seeded shuffle, cycled with the next sample number."""
    if not pool:
        raise GenerationError(
            f"no passage of at least {MIN_UNIT_WORDS} words to write queries from"
        )
    order = list(pool)
    random.Random(seed).shuffle(order)
    return [(order[i % len(order)], i // len(order)) for i in range(n)]


def parse_query(text: str) -> str | None:
    """The query of a clean reply (one non-empty line, bounded, holding a letter), else None."""
    query = text.strip()
    if not query or "\n" in query or len(query) > MAX_QUERY_CHARS or not _LETTER.search(query):
        return None
    return query


def normalise(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def near_duplicate(a: str, b: str) -> bool:
    """Equal normalised texts, or a token Jaccard of at least JACCARD (both normalised)."""
    if a == b:
        return True
    ta, tb = set(a.split()), set(b.split())
    return bool(ta | tb) and len(ta & tb) / len(ta | tb) >= JACCARD


def queries_table(rows: list[tuple[str, str]]) -> pd.DataFrame:
    """A QUERIES table of (id, text) pairs, for running systems over companion queries."""
    frame = pd.DataFrame(
        [dict(query_id=q, text=t, intent="synthetic", query_type="specific") for q, t in rows],
        columns=tables.QUERIES.names,
    )
    return tables.conform(frame, tables.QUERIES).to_pandas()


def write_queries(
    llm: LLM, suite: Suite, n: int, seed: int, stored_chunks: StoredChunks | None = None
) -> tuple[list[tuple[str, str, Unit, int]], int]:
    """Candidate (id, query, unit, sample) rows and the number of unparseable replies.
    Ids are `syn-<draw number>`: stable when n grows or a filter changes. `stored_chunks`: as
    `units` takes them."""
    drawn = draws(units(suite, stored_chunks), n, seed)
    jobs = [(prompts.SYNTHETIC_QUERY.format(passage=u.text), s) for u, s in drawn]
    replies = llm.complete_jobs(jobs)
    out, unparseable = [], 0
    for i, ((unit, sample), reply) in enumerate(zip(drawn, replies, strict=True)):
        query = parse_query(reply.text)
        if query is None:
            unparseable += 1
        else:
            out.append((f"syn-{i + 1:04d}", query, unit, sample))
    return out, unparseable


def without_duplicates(
    suite: Suite, candidates: list[tuple[str, str, Unit, int]]
) -> list[tuple[str, str, Unit, int]]:
    """Candidates that near-duplicate no suite query and no earlier kept candidate."""
    seen = [normalise(q.query) for q in suite.queries if q.query.strip()]
    kept = []
    for row in candidates:
        text = normalise(row[1])
        if not any(near_duplicate(text, other) for other in seen):
            kept.append(row)
            seen.append(text)
    return kept


def round_trip(
    candidates: list[tuple[str, str, Unit, int]], ranks: pd.DataFrame, llm: LLM
) -> list[SyntheticQuery]:
    """The candidates whose source is among their pooled targets at depth ROUND_TRIP_DEPTH
    (`ranks`: query_id, target_id, system, rank, as `pool.target_ranks` gives them)."""
    found = ranks[ranks["rank"] <= ROUND_TRIP_DEPTH]
    by_pair = {
        key: dict(zip(group["system"], group["rank"].astype(int), strict=True))
        for key, group in found.groupby(["query_id", "target_id"])
    }
    template = prompt_hash(prompts.SYNTHETIC_QUERY)
    return [
        SyntheticQuery(
            id=query_id,
            query=text,
            source_id=unit.target_id,
            model=llm.label,
            prompt_hash=template,
            sample=sample,
            round_trip=by_pair[(query_id, unit.target_id)],
        )
        for query_id, text, unit, sample in candidates
        if (query_id, unit.target_id) in by_pair
    ]


def human_sample(queries: list[SyntheticQuery], size: int) -> HumanSample:
    """The recorded uniform draw of `size` query ids with the seed the kept queries commit to
    (`statistics/sampling.py`, which the PPI gate checks the human-judged queries against)."""
    if not 2 <= size < len(queries):
        raise GenerationError(
            f"a human sample of {size} from {len(queries)} kept synthetic queries: it needs "
            "2 or more, and fewer than all of them, or PPI has no LLM-only query to add "
            "(draw more with --n, or sample fewer)"
        )
    return draw_sample([q.id for q in queries], size)


def companion_path(folder: Path, suite: Suite) -> Path:
    return folder / f"{suite.name}.synthetic.jsonl"


def sheet_path(folder: Path, suite: Suite) -> Path:
    """The judging sheet of the companion set's human sample (graded: its human qrels)."""
    return folder / f"{suite.name}.synthetic.sheet.jsonl"


def write_companion(path: Path, queries: list[SyntheticQuery]) -> None:
    write_text(path, jsonl(queries))


def read_companion(path: Path) -> list[SyntheticQuery]:
    """The companion file; InputError names the line and field of the first bad row."""
    out, seen = [], set()
    for line, row in jsonl_rows(path):
        try:
            query = SyntheticQuery.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise InputError(path, first["msg"], line=line, field=field) from None
        if query.id in seen:
            raise InputError(path, f"duplicate id {query.id!r}", line=line, field="id")
        seen.add(query.id)
        out.append(query)
    return out
