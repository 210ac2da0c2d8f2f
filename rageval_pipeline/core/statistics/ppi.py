"""Prediction-powered inference (PPI++) for a measure's mean and a paired delta between runs.

A measure is computed per query twice: with human qrels on a random human-judged sample of n
queries, and with LLM qrels on all N queries of the population (docs/statistics.md). PPI++
(Angelopoulos, Duchi & Zrnic 2023) estimates the population mean as

    theta = lam * mean(llm on the N - n others) + mean(human - lam * llm on the n sampled)

with lam tuned from the data to minimise the variance; the human sample measures and removes
the judge's bias whatever its error profile, so the interval is valid, and the LLM-judged
queries narrow it as far as the judge agrees with the humans (lam = 0 is the human-only mean).
The estimate and interval are `ppi_py`'s (`ppi_mean_pointestimate`, `ppi_mean_ci`, lam=None).
The labelled and unlabelled sets are disjoint, as the estimator assumes: the sampled queries
once with both labels, the others with the LLM's alone.

A paired delta is the same estimate of the per-query difference B - A.

The effective sample size is how many human-judged queries alone would give the same interval;
the MDE with and without the LLM-judged queries is `statistics.minimum_detectable_effect` on
the human sample scaled by the ratio of standard errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import TypeVar

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.statistics.paired import (
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    PairedTest,
    minimum_detectable_effect,
)
from rageval_pipeline.core.statistics.sampling import HumanSample

_M = TypeVar("_M")  # a Measure or its canonical name


class PpiEstimate(BaseModel):
    """The PPI++ estimate of one mean (or paired delta) with its (1 - alpha) interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    estimate: float
    ci_low: float
    ci_high: float
    n_human: int  # human-judged queries (the random sample)
    n_llm: int  # LLM-judged queries: the whole population, the sample included
    human_mean: float  # the human-only mean on the sample
    human_ci_low: float  # its normal-approximation interval, for comparison
    human_ci_high: float
    effective_n: float  # human-judged queries that alone would give this interval's width
    mde: float  # minimum detectable effect with the LLM-judged queries
    mde_human: float  # ... and with the human sample alone
    p_value: float  # two-sided z-test that the mean (delta) is 0, from the same estimate and SE


def z_value(alpha: float) -> float:
    """The two-sided normal quantile of a (1 - alpha) interval."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def ppi_mean(
    human: np.ndarray,
    llm_sampled: np.ndarray,
    llm_others: np.ndarray,
    *,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> PpiEstimate:
    """PPI++ mean from per-query values: human and LLM on the sampled queries (aligned), and
    LLM on the population's other queries."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # seconds to import: only when used

    y = np.asarray(human, dtype=float)
    yhat, unlabeled = np.asarray(llm_sampled, dtype=float), np.asarray(llm_others, dtype=float)
    n, others = len(y), len(unlabeled)
    if n < 2 or others < 1 or len(yhat) != n:
        raise ValueError(f"PPI needs >= 2 aligned sampled queries and others ({n}, {others})")
    # Constant LLM values carry no information and leave lam 0/0: the human-only mean then.
    lam = 0.0 if np.ptp(np.concatenate([yhat, unlabeled])) == 0 else None
    estimate = float(ppi_mean_pointestimate(y, yhat, unlabeled, lam=lam)[0])
    low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, unlabeled, alpha=alpha, lam=lam))
    z = z_value(alpha)
    # The same normal approximation without the LLM (ppi_py's lam=0, population SD).
    human_se = float(np.std(y) / np.sqrt(n))
    se = (high - low) / (2 * z)
    sd = float(np.std(y, ddof=1))
    mde_human = minimum_detectable_effect(sd, n, alpha=alpha, power=power)
    ratio = se / human_se if human_se > 0 else 1.0
    p_value = 2 * (1 - NormalDist().cdf(abs(estimate) / se)) if se > 0 else float(estimate == 0)
    return PpiEstimate(
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        n_human=n,
        n_llm=n + others,
        human_mean=float(y.mean()),
        human_ci_low=float(y.mean() - z * human_se),
        human_ci_high=float(y.mean() + z * human_se),
        effective_n=float(n / ratio**2) if ratio > 0 else float("inf"),
        mde=mde_human * ratio,
        mde_human=mde_human,
        p_value=p_value,
    )


PerQuery = Mapping[str, Mapping[str, float]]  # query -> measure -> value (RunSummary.per_query)


def nested(per_query: pd.DataFrame) -> dict[str, dict[str, float]]:
    """A per-query table (query_id, measure, value) as query -> measure -> value."""
    out: dict[str, dict[str, float]] = {}
    for query_id, measure, value in per_query[["query_id", "measure", "value"]].itertuples(
        index=False
    ):
        out.setdefault(query_id, {})[measure] = float(value)
    return out


def by_query(values: PerQuery, measure: str, queries: list[str]) -> np.ndarray:
    """A measure's LLM-judged values for `queries`, in order. A query the judge labelled without
    a relevant document has no value (the measures leave it out) and scores 0 (as trec_eval -c):
    the judge said nothing it retrieved is relevant."""
    return np.array([values.get(q, {}).get(measure, 0.0) for q in queries], dtype=float)


def sampled_values(
    values: PerQuery, measure: str, drawn: list[str], *, where: str | Path | None = None
) -> np.ndarray:
    """A measure's human-judged values on the drawn queries, in order. A drawn query without
    one (not judged, or judged with no relevant document) is refused in one line, never scored
    0: a 0 would be a value nobody measured, biasing the correction PPI rests on."""
    missing = [q for q in drawn if measure not in values.get(q, {})]
    if missing:
        raise InputError(
            where,
            f"{len(missing)} drawn quer{'y has' if len(missing) == 1 else 'ies have'} no "
            f"human-judged {measure} (first: {missing[0]}; not judged, or judged with no "
            "relevant document): PPI needs a human value for every drawn query",
        )
    return np.array([values[q][measure] for q in drawn], dtype=float)


def _split(sample: HumanSample) -> tuple[list[str], list[str]]:
    drawn = sample.drawn()
    chosen = set(drawn)
    return drawn, sorted(q for q in sample.frame if q not in chosen)


def _per_measure(
    human: Callable[[str, list[str]], np.ndarray],
    llm: Callable[[str, list[str]], np.ndarray],
    sample: HumanSample,
    measures: Sequence[_M],
    alpha: float,
    power: float,
) -> dict[_M, PpiEstimate]:
    """PPI++ per measure from `human(measure, queries)` on the drawn queries and
    `llm(measure, queries)` on the drawn and the other queries of the frame."""
    drawn, others = _split(sample)
    return {
        m: ppi_mean(
            human(str(m), drawn),
            llm(str(m), drawn),
            llm(str(m), others),
            alpha=alpha,
            power=power,
        )
        for m in measures
    }


def ppi_means(
    human: PerQuery,
    llm: PerQuery,
    sample: HumanSample,
    measures: Sequence[_M],
    *,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    where: str | Path | None = None,
) -> dict[_M, PpiEstimate]:
    """Per measure (a Measure or its name; values are found by its canonical name), the PPI++
    population mean from per-query values scored with the human qrels and with the LLM qrels
    (checked by `sampling.check_sample`); `where` names the human qrels in a refusal."""
    return _per_measure(
        lambda m, q: sampled_values(human, m, q, where=where),
        lambda m, q: by_query(llm, m, q),
        sample,
        measures,
        alpha,
        power,
    )


def ppi_deltas(
    human: tuple[PerQuery, PerQuery],
    llm: tuple[PerQuery, PerQuery],
    sample: HumanSample,
    measures: Sequence[_M],
    *,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    where: str | Path | None = None,
) -> dict[_M, PpiEstimate]:
    """Per measure (as in `ppi_means`), the PPI++ paired delta B - A: PPI on the per-query
    differences. `human` and `llm` are (A, B) pairs of per-query values."""

    def human_diff(m: str, q: list[str]) -> np.ndarray:
        a, b = (sampled_values(values, m, q, where=where) for values in human)
        return b - a

    def llm_diff(m: str, q: list[str]) -> np.ndarray:
        return by_query(llm[1], m, q) - by_query(llm[0], m, q)

    return _per_measure(human_diff, llm_diff, sample, measures, alpha, power)


def as_paired_test(delta: PpiEstimate) -> PairedTest:
    """The gate's view of a PPI paired delta: its interval and MDE decide (rule `ppi`); the
    human-only delta and interval on the sample, and the effective n, ride along for the report."""
    return PairedTest(
        n=delta.n_llm,
        delta=delta.estimate,
        ci_low=delta.ci_low,
        ci_high=delta.ci_high,
        p_value=delta.p_value,
        mde=delta.mde,
        effective_n=delta.effective_n,
        human_only=PairedTest(
            n=delta.n_human,
            delta=delta.human_mean,
            ci_low=delta.human_ci_low,
            ci_high=delta.human_ci_high,
            p_value=None,
            mde=delta.mde_human,
        ),
    )
