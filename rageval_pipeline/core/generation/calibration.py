"""Judge calibration: how far the LLM's labels can stand in for human ones.

On the pairs that carry both a human grade and an LLM label: Cohen's weighted kappa (quadratic,
scikit-learn, `curation/agreement.py`), the 4x4 confusion table (rows: human grade, columns: LLM
grade) and, per human grade, the count of unparseable LLM replies. Kendall's tau (scipy) of
the system rankings: each pooled system scored by its mean nDCG@10 over the human-judged
queries under the human grades, then under the LLM's.

The gate policy's floor (`calibration.min_kappa` in data/gate.yaml, default 0.4) decides
whether the labels may be used for gating; below it `refusal` is the one line the gate shows.

Bias checks, recorded with the calibration: the same judge's labels with the passage presented
with its title and truncated, against the plain ones; and a second judge model's labels, each
on a seeded sample of the human-judged pairs (agreement: exact share and weighted kappa).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pandas as pd
from pydantic import BaseModel

from rageval_pipeline.core.curation.agreement import GRADES, kappa
from rageval_pipeline.core.generation.judge_labels import Label
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.measures import evaluate

SCORE_MEASURE = "nDCG@10"
Key = tuple[str, str]


class Check(BaseModel):
    """Agreement of another labelling (a presentation, a judge) with the plain labels."""

    name: str
    judge: str
    pairs: int  # pairs where both labels parsed
    unparseable: int
    same: float | None  # share of identical grades
    kappa_quadratic: float | None


class Calibration(BaseModel):
    judge: str
    pairs: int  # human-graded pairs the judge labelled (parsed or not)
    unparseable: int
    kappa_quadratic: float | None
    confusion: list[list[int]]  # [human grade][LLM grade]
    unparseable_by_grade: list[int]  # [human grade]
    systems: list[str]
    human_scores: list[float]
    llm_scores: list[float]
    kendall_tau: float | None
    min_kappa: float
    usable: bool
    refusal: str | None  # the gate's message when not usable
    checks: list[Check] = []


def sample_keys(keys: list[Key], size: int, seed: int) -> list[Key]:
    """A seeded uniform sample of pairs for the bias checks, in the given order."""
    chosen = set(random.Random(seed).sample(keys, min(size, len(keys))))
    return [k for k in keys if k in chosen]


def check(name: str, plain: list[Label], other: list[Label]) -> Check:
    base = {(lab.query_id, lab.target_id): lab.grade for lab in plain}
    both = [(base[(o.query_id, o.target_id)], o.grade) for o in other]
    parsed = [(a, b) for a, b in both if a is not None and b is not None]
    return Check(
        name=name,
        judge=other[0].judge if other else "",
        pairs=len(parsed),
        unparseable=sum(b is None for _, b in both),
        same=sum(a == b for a, b in parsed) / len(parsed) if parsed else None,
        kappa_quadratic=kappa([a for a, _ in parsed], [b for _, b in parsed], "quadratic"),
    )


def per_query_values(
    ranks: pd.DataFrame, grades: Mapping[Key, int], queries: list[str], measure: str
) -> dict[str, dict[str, float]]:
    """system -> query -> `measure` of its pooled ranking under `grades`, for every query in
    `queries` (0 where no target of the query is relevant: the measure is then undefined, and
    a system cannot be credited)."""
    qrels = pd.DataFrame(
        [dict(split="test", query_id=q, doc_id=t, relevance=g) for (q, t), g in grades.items()],
        columns=tables.QRELS.names,
    )
    qrels = tables.conform(qrels, tables.QRELS).to_pandas()
    out = {}
    for system, run in ranks[ranks["query_id"].isin(queries)].groupby("system", sort=True):
        run = run.sort_values(["query_id", "rank", "target_id"])
        run = pd.DataFrame(
            dict(
                query_id=run["query_id"],
                doc_id=run["target_id"],
                rank=run["rank"],
                score=-run["rank"].astype(float),
            ),
            columns=tables.RUN.names,
        )
        values = evaluate(qrels, tables.conform(run, tables.RUN).to_pandas(), [measure])
        found = dict(zip(values["query_id"], values["value"], strict=True))
        out[system] = {q: float(found.get(q, 0.0)) for q in queries}
    return out


def _mean_scores(
    ranks: pd.DataFrame, grades: Mapping[Key, int], queries: list[str]
) -> dict[str, float]:
    values = per_query_values(ranks, grades, queries, SCORE_MEASURE)
    return {s: sum(v.values()) / len(queries) for s, v in values.items()}


def calibrate(
    labels: list[Label],
    human: Mapping[Key, int],
    ranks: pd.DataFrame,
    min_kappa: float,
    checks: list[Check] = (),
) -> Calibration:
    """Agreement of the plain labels with the human grades, and the gating decision."""
    from scipy.stats import kendalltau

    labelled = [lab for lab in labels if (lab.query_id, lab.target_id) in human]
    confusion = [[0] * len(GRADES) for _ in GRADES]
    missing = [0] * len(GRADES)
    pairs = []
    for lab in labelled:
        truth = human[(lab.query_id, lab.target_id)]
        if lab.grade is None:
            missing[truth] += 1
        else:
            confusion[truth][lab.grade] += 1
            pairs.append((truth, lab.grade))
    weighted = kappa([a for a, _ in pairs], [b for _, b in pairs], "quadratic")
    queries = sorted({q for q, _ in human})
    llm_grades = {
        (lab.query_id, lab.target_id): lab.grade for lab in labels if lab.grade is not None
    }
    human_scores = _mean_scores(ranks, human, queries)
    llm_scores = _mean_scores(
        ranks, {k: g for k, g in llm_grades.items() if k[0] in set(queries)}, queries
    )
    systems = sorted(human_scores)
    tau = None
    if len(systems) >= 2:
        value = kendalltau(
            [human_scores[s] for s in systems], [llm_scores[s] for s in systems]
        ).statistic
        tau = None if value != value else float(value)  # NaN when a ranking is all ties
    judge = labels[0].judge if labels else ""
    usable = weighted is not None and weighted >= min_kappa
    refusal = None
    if weighted is None:  # no pair, or one grade only on a side: kappa has no value
        refusal = (
            f"LLM labels of {judge} refused for gating: their weighted kappa with human grades "
            f"is undefined on {len(pairs)} pair(s) with a parseable label (calibration."
            f"min_kappa {min_kappa:g} needs human-graded pairs of several grades)"
        )
    elif not usable:
        refusal = (
            f"LLM labels of {judge} refused for gating: their weighted kappa with human grades "
            f"is {weighted:.3f} on {len(pairs)} pair(s), below calibration.min_kappa "
            f"{min_kappa:g}"
        )
    return Calibration(
        judge=judge,
        pairs=len(labelled),
        unparseable=sum(missing),
        kappa_quadratic=weighted,
        confusion=confusion,
        unparseable_by_grade=missing,
        systems=systems,
        human_scores=[human_scores[s] for s in systems],
        llm_scores=[llm_scores[s] for s in systems],
        kendall_tau=tau,
        min_kappa=min_kappa,
        usable=usable,
        refusal=refusal,
        checks=list(checks),
    )
