"""The generation check: reference answers, RAG answers, LLM-as-judge correctness.

1. `synthesize_ground_truth`: for each query of a dataset's generation set, a reference answer
   written from its most relevant judged targets: those of the highest grade the query has
   (recorded per query), at most `MAX_TARGETS` of them, in id order. For the five nfcorpus
   queries of docs/generation.md that is grade 2: BEIR's test qrels hold 21, 20, 16, 15 and 14
   grade-2 documents for them (checked in tests/test_generation_core.py).
2. `rag_answers`: each system answers from its own top `context_k` retrieved units.
3. `judge_answers`: the judge compares answer and reference, TRUE/FALSE, raw output kept; with
   n samples, the verdict is the strict majority (else `unparseable`) and agreement is reported.
4. `summarize`: the correctness rate = TRUE / judged (an `unparseable` verdict counts as not
   correct), with a 95% Wilson score interval (good coverage at the small n of these sets).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from pydantic import BaseModel

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import prompts
from rageval_pipeline.core.generation.llm import LLM, agreement, prompt_hash
from rageval_pipeline.core.generation.verdicts import VERDICT, Verdict, parse_verdict
from rageval_pipeline.core.storage.base import BaseWarehouse

MEASURE = "AnswerCorrectness"
MAX_TARGETS = 5  # docs/generation.md, `ground_truth`
# Default generation sets: queries whose best-judged targets hold an answer.
GENERATION_SETS: dict[str, tuple[str, ...]] = {
    "nfcorpus": ("PLAIN-2630", "PLAIN-2660", "PLAIN-2510", "PLAIN-2430", "PLAIN-2690"),
    # Factual questions whose grade-3 chunk states the answer (rate limit, header, sizes...).
    "techdocs": ("Q002", "Q003", "Q004", "Q005", "Q006"),
    # Policy/amenity questions answered in one entity (refund, pool, check-in, pets, key card).
    "hotel": ("q001", "q002", "q003", "q007", "q010"),
    "beir-mini": ("q01", "q02"),
}

Texts = dict[str, tuple[str, str]]  # unit id -> (title, text)


class Reference(BaseModel):
    query_id: str
    query: str
    answer: str
    grade: int  # the highest grade the query has: the grade of the targets used
    targets: list[str]


class GroundTruth(BaseModel):
    """A versioned set of reference answers and what wrote them."""

    dataset: str
    version: str  # hash of model, parameters, prompt and targets: a change makes a new file
    provider: str
    model: str
    params: dict
    prompt_sha256: str
    created_at: str
    references: list[Reference]


class CorrectnessSummary(BaseModel):
    rate: float
    ci95_low: float
    ci95_high: float
    interval: str = "wilson"
    n: int
    true: int
    false: int
    unparseable: int
    mean_agreement: float
    samples: int


def best_targets(qrels: pd.DataFrame, query_id: str) -> tuple[int, list[str]]:
    """(highest grade present, up to MAX_TARGETS ids judged that grade, in id order)."""
    judged = qrels[(qrels["query_id"] == query_id) & (qrels["relevance"] > 0)]
    if judged.empty:
        raise ValueError(f"query {query_id} has no relevant judgment: cannot write a reference")
    grade = int(judged["relevance"].max())
    ids = sorted(judged.loc[judged["relevance"] == grade, "doc_id"].astype(str))
    return grade, ids[:MAX_TARGETS]


def check_set(
    query_ids: tuple[str, ...], queries: pd.DataFrame, qrels: pd.DataFrame, where: Path, named: str
) -> None:
    """Every query of a generation set (`named`: where it comes from) is in the dataset and has
    a relevant judgment, else one InputError naming the dataset's file (`where`) and the query."""
    known = set(queries["query_id"])
    judged = set(qrels.loc[qrels["relevance"] > 0, "query_id"])
    for query_id in query_ids:
        if query_id not in known:
            raise InputError(where, f"query {query_id} of {named} is not in this dataset")
        if query_id not in judged:
            raise InputError(
                where,
                f"query {query_id} of {named} has no relevant judgment "
                "(a reference answer is written from its best-judged targets)",
            )


def ground_truth_version(llm: LLM, plan: list[tuple[str, str, int, list[str]]]) -> str:
    key = dict(
        provider=llm.config.provider,
        model=llm.config.model,
        params=llm.config.params(),
        prompt=prompt_hash(prompts.GROUND_TRUTH),
        plan=plan,
    )
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def plan_ground_truth(
    queries: pd.DataFrame, qrels: pd.DataFrame, query_ids: tuple[str, ...]
) -> list[tuple[str, str, int, list[str]]]:
    """(query id, text, grade used, target ids) per query of the generation set (checked
    with `check_set` first)."""
    text = dict(zip(queries["query_id"], queries["text"], strict=True))
    return [(q, str(text[q]), *best_targets(qrels, q)) for q in query_ids]


def synthesize_ground_truth(
    llm: LLM, dataset: str, plan: list[tuple[str, str, int, list[str]]], texts: Texts
) -> GroundTruth:
    prompt_list = [
        prompts.GROUND_TRUTH.format(
            query=query, context=prompts.documents_block([texts[t] for t in targets])
        )
        for _, query, _, targets in plan
    ]
    answers = llm.complete_all(prompt_list)
    return GroundTruth(
        dataset=dataset,
        version=ground_truth_version(llm, plan),
        provider=llm.config.provider,
        model=llm.config.model,
        params=llm.config.params(),
        prompt_sha256=prompt_hash(prompts.GROUND_TRUTH),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        references=[
            Reference(query_id=q, query=text, answer=a[0].text, grade=g, targets=t)
            for (q, text, g, t), a in zip(plan, answers, strict=True)
        ],
    )


def rag_answers(
    llm: LLM, run: pd.DataFrame, references: list[Reference], texts: Texts, context_k: int = 5
) -> pd.DataFrame:
    """One answer per reference query from the system's top `context_k` retrieved units."""
    hits = run[run["doc_id"].notna()].sort_values(["query_id", "rank"], kind="mergesort")
    contexts, prompt_list = [], []
    for ref in references:
        ids = hits.loc[hits["query_id"] == ref.query_id, "doc_id"].head(context_k).tolist()
        found = [i for i in ids if i in texts]
        contexts.append(found)
        block = prompts.documents_block([texts[i] for i in found]) or "(nothing retrieved)"
        prompt_list.append(prompts.RAG_ANSWER.format(query=ref.query, context=block))
    answers = llm.complete_all(prompt_list)
    return pd.DataFrame(
        dict(
            query_id=[r.query_id for r in references],
            query=[r.query for r in references],
            context_ids=[json.dumps(c) for c in contexts],
            answer=[a[0].text for a in answers],
            answered_by=llm.label,
            input_tokens=[a[0].input_tokens for a in answers],
            output_tokens=[a[0].output_tokens for a in answers],
        )
    )


def majority(verdicts: list[Verdict]) -> Verdict:
    """The verdict of a strict majority of samples; a split vote is `unparseable`."""
    (top, count), *_ = Counter(verdicts).most_common(1)
    return top if count * 2 > len(verdicts) else "unparseable"


def judge_answers(
    llm: LLM, answers: pd.DataFrame, references: list[Reference], samples: int = 1
) -> pd.DataFrame:
    by_id = {r.query_id: r for r in references}
    prompt_list = [
        prompts.CORRECTNESS.format(
            query=row.query, answer=row.answer, reference=by_id[row.query_id].answer
        )
        for row in answers.itertuples(index=False)
    ]
    outputs = llm.complete_all(prompt_list, samples, VERDICT)
    verdicts = [[parse_verdict(c.text) for c in out] for out in outputs]
    return pd.DataFrame(
        dict(
            query_id=answers["query_id"].tolist(),
            verdict=[majority(v) for v in verdicts],
            sample_verdicts=[json.dumps(v) for v in verdicts],
            agreement=[agreement(v) for v in verdicts],
            raw_output=[json.dumps([c.text for c in out], ensure_ascii=False) for out in outputs],
            judged_by=llm.label,
        )
    )


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% by default)."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(judgments: pd.DataFrame) -> CorrectnessSummary:
    counts = judgments["verdict"].value_counts()
    n, true = len(judgments), int(counts.get("TRUE", 0))
    low, high = wilson_interval(true, n)
    samples = len(json.loads(judgments["sample_verdicts"].iloc[0])) if n else 0
    return CorrectnessSummary(
        rate=true / n if n else math.nan,
        ci95_low=low,
        ci95_high=high,
        n=n,
        true=true,
        false=int(counts.get("FALSE", 0)),
        unparseable=int(counts.get("unparseable", 0)),
        mean_agreement=float(judgments["agreement"].mean()) if n else math.nan,
        samples=samples,
    )


def metric_rows(summary: CorrectnessSummary, judgments: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Long-format rows for `run_metrics` (the rate, its interval in `ci_low`/`ci_high` like
    every measure's) and `query_metrics` (unparseable counts as 0)."""
    means = pd.DataFrame(
        dict(
            measure=[MEASURE],
            value=[summary.rate],
            ci_low=[summary.ci95_low],
            ci_high=[summary.ci95_high],
        )
    )
    per_query = pd.DataFrame(
        dict(
            query_id=judgments["query_id"],
            measure=MEASURE,
            value=(judgments["verdict"] == "TRUE").astype(float),
        )
    )
    return {"run_metrics": means, "query_metrics": per_query}


def record(
    warehouse: BaseWarehouse,
    keys: dict[str, str],
    rows: dict[str, pd.DataFrame],
    created_at: datetime,
) -> None:
    """Attach the rows to the retrieval run they judge (`keys`: run_id, dataset, split,
    system), replacing earlier correctness rows of that run, at once: the gate then
    sees `AnswerCorrectness` beside the run's retrieval measures."""
    tables = {
        "run_metrics": rows["run_metrics"].assign(**keys, created_at=created_at),
        "query_metrics": rows["query_metrics"].assign(**keys),
    }
    # LIKE: also the `AnswerCorrectness.ci95_*` rows that earlier versions wrote.
    warehouse.replace_measures(keys["run_id"], f"{MEASURE}%", tables)


def unit_texts(corpus: pd.DataFrame, *chunk_tables: pd.DataFrame) -> Texts:
    """(title, text) of every corpus document and every chunk, by id: what a run or a qrels
    row may name."""
    texts: Texts = {
        str(d): (str(t or ""), str(x or ""))
        for d, t, x in zip(corpus["doc_id"], corpus["title"], corpus["text"], strict=True)
    }
    for chunks in chunk_tables:
        texts.update(
            {
                str(c): (str(t or ""), str(x or ""))
                for c, t, x in zip(chunks["chunk_id"], chunks["title"], chunks["text"], strict=True)
            }
        )
    return texts
