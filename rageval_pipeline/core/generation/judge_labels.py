"""LLM relevance labels at scale: the UMBRELA 0-3 prompt over a pool.

Every (query, target) pair in the pooled top `depth` of every query, the suite's and the
synthetic ones, is graded once with `prompts.RELEVANCE` (Upadhyay et al. 2024). The response
cache (`core/generation/llm.py`) is keyed by provider, model, sampling parameters and the hash
of the whole prompt, which is the template with the query and the passage in it: a changed
template, query or passage is a new call, anything else a cache hit. Each label records the
template's hash and the passage's SHA-256 beside the judge.

An unparseable reply is a label with `grade` null: counted, kept with its raw text, and left
out of the TREC qrels written for `--llm-qrels`, so the pair is unjudged there (scored as
not relevant, and counted by Judged@k), never relevant.

Presentations, for the bias checks: `plain` (the passage as retrieved), `title` (its
document's title on a line before it) and `truncated` (its first `TRUNCATE_WORDS` words).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from rageval_pipeline.core.generation import prompts
from rageval_pipeline.core.generation.llm import LLM, Usage, prompt_hash
from rageval_pipeline.core.generation.verdicts import GRADE, parse_grade
from rageval_pipeline.core.suites.matching import split_chunk_id

Presentation = Literal["plain", "title", "truncated"]
TRUNCATE_WORDS = 40
LABEL_COLUMNS = (
    "query_id",
    "target_id",
    "synthetic",
    "presentation",
    "grade",
    "raw",
    "judge",
    "prompt_hash",
    "passage_sha256",
)


class Label(BaseModel):
    model_config = ConfigDict(frozen=True)

    query_id: str
    target_id: str
    synthetic: bool
    presentation: Presentation = "plain"
    grade: int | None = Field(None, ge=0, le=3)  # None: the reply was unparseable
    raw: str
    judge: str  # provider:model
    prompt_hash: str  # of the template
    passage_sha256: str  # of the passage as presented


class Pair(BaseModel):
    """One pooled pair to grade, with the texts the judge reads."""

    model_config = ConfigDict(frozen=True)

    query_id: str
    query: str
    target_id: str
    passage: str
    title: str = ""
    synthetic: bool = False


def pooled_pairs(
    ranks: pd.DataFrame,
    queries: Mapping[str, tuple[str, bool]],
    passage_of: Mapping[str, str],
    title_of: Mapping[str, str],
    depth: int,
) -> list[Pair]:
    """The pairs in the top `depth` of any system (`ranks` as `pool.target_ranks` gives),
    in `queries` order (id -> (text, synthetic)), then best rank and target id."""
    top = ranks[(ranks["rank"] <= depth) & ranks["query_id"].isin(queries)]
    best = top.groupby(["query_id", "target_id"], as_index=False)["rank"].min()
    order = {q: i for i, q in enumerate(queries)}
    best = best.assign(order=best["query_id"].map(order)).sort_values(
        ["order", "rank", "target_id"]
    )
    return [
        Pair(
            query_id=q,
            query=queries[q][0],
            target_id=t,
            passage=passage_of[t],
            title=title_of.get(_doc(t), ""),
            synthetic=queries[q][1],
        )
        for q, t in zip(best["query_id"], best["target_id"], strict=True)
    ]


def _doc(target_id: str) -> str:
    parsed = split_chunk_id(target_id)
    return target_id if parsed is None else parsed[0]


def present(pair: Pair, presentation: Presentation) -> str:
    if presentation == "title":
        return f"Title: {pair.title}\n{pair.passage}"
    if presentation == "truncated":
        return " ".join(pair.passage.split()[:TRUNCATE_WORDS])
    return pair.passage


def grade(llm: LLM, pairs: list[Pair], presentation: Presentation = "plain") -> list[Label]:
    """One label per pair, `concurrency` calls at a time (a dry run labels nothing)."""
    passages = [present(p, presentation) for p in pairs]
    jobs = [
        (prompts.RELEVANCE.format(query=p.query, passage=x), 0)
        for p, x in zip(pairs, passages, strict=True)
    ]
    replies = llm.complete_jobs(jobs, GRADE)
    template = prompt_hash(prompts.RELEVANCE)
    return [
        Label(
            query_id=p.query_id,
            target_id=p.target_id,
            synthetic=p.synthetic,
            presentation=presentation,
            grade=parse_grade(reply.text),
            raw=reply.text,
            judge=llm.label,
            prompt_hash=template,
            passage_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        )
        for p, text, reply in zip(pairs, passages, replies, strict=True)
    ]


def labels_frame(labels: list[Label]) -> pd.DataFrame:
    frame = pd.DataFrame([lab.model_dump() for lab in labels], columns=list(LABEL_COLUMNS))
    return frame.astype({"grade": "Int64"})


def parsed_grades(frame: pd.DataFrame) -> dict[tuple[str, str], int]:
    """(query, target) -> grade of a labels table's parsed labels (unparseable ones left out)."""
    parsed = frame[frame["grade"].notna()]
    keys = zip(parsed["query_id"], parsed["target_id"], strict=True)
    return dict(zip(keys, parsed["grade"].astype(int), strict=True))


def trec_qrels(labels: list[Label]) -> str:
    """TREC qrels (`query 0 target grade`) of the parsed labels; unparseable ones left out."""
    parsed = {(lab.query_id, lab.target_id): lab.grade for lab in labels if lab.grade is not None}
    return "".join(f"{q} 0 {t} {g}\n" for (q, t), g in sorted(parsed.items()))


def cost(usage: Usage, price_in: float, price_out: float) -> float:
    """Estimated spend in the prices' currency; prices are per million tokens."""
    return (usage.input_tokens * price_in + usage.output_tokens * price_out) / 1e6
