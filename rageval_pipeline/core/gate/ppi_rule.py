"""`statistics.rule: ppi`: the paired delta against the baseline judged by its PPI++ interval.

Both the run and its baseline carry per-query values with human qrels on a recorded random
sample (`sample_per_query`) and with LLM qrels on every query of the population (`llm_per_query`),
and the same sampling record (`human_sample`). The delta's PPI++ interval (core.statistics.ppi) then
decides exactly as the bootstrap interval does under `interval`. Without those inputs the gate
does not fall back to another rule: it refuses, in one line, to judge the run's measures. The
draw is checked again here (`sampling.check_drawn`), whoever built the summaries: a human-judged
query set that is not the recorded draw never decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate.decision import Statistics
from rageval_pipeline.core.gate.evaluation import Evaluation
from rageval_pipeline.core.gate.models import Baseline, Check, RunSummary
from rageval_pipeline.core.measures.measure import Measure
from rageval_pipeline.core.statistics.paired import PairedTest
from rageval_pipeline.core.statistics.sampling import HumanSample, check_drawn

if TYPE_CHECKING:
    from rageval_pipeline.core.statistics.ppi import PerQuery

_M = TypeVar("_M")  # a Measure or its canonical name


def _not_the_draw(summary: RunSummary | Baseline) -> str | None:
    """Why the summary's human-judged queries miss some of its recorded draw; None when they
    do not. (Only the missing side can be seen here: the measures that need no judgment, such
    as Diversity@10, have values for every query the run retrieved for; the PPI estimate reads
    the drawn queries alone, and a drawn query without a value for a measure is refused by
    `ppi.sampled_values`.)"""
    sample = summary.human_sample
    assert sample is not None
    try:
        check_drawn(sample, set(summary.sample_per_query) & set(sample.drawn()), where=None)
    except InputError as error:
        return error.problem
    return None


def refusal(run: Evaluation, baseline: Baseline) -> Check | None:
    """The one blocking check that says why PPI cannot judge this run, or None when it can."""
    s = run.summary
    if not s.llm_per_query or s.human_sample is None:
        why = (
            "this run has no LLM-judged per-query values with a recorded human sample "
            "(evaluate it with LLM qrels and the sampling record, docs/statistics.md)"
        )
    elif not baseline.llm_per_query or baseline.human_sample != s.human_sample:
        why = (
            "its baseline was not scored with LLM qrels on the same population and human "
            "sample; re-record the baseline from such a run"
        )
    elif problem := _not_the_draw(s):
        why = f"for this run {problem}"
    elif problem := _not_the_draw(baseline):
        why = f"for its baseline {problem}"
    else:
        return None
    return run.check(
        kind="baseline",
        passed=False,
        blocking=True,
        message=f"{run.label}: refused: statistics.rule is ppi but {why}",
    )


def measured_on_population(summary: RunSummary) -> set[str]:
    """The measures the PPI population was measured with (its drawn queries' human values):
    not the span measures, for instance, which need the suite's evidence spans."""
    return {m for values in summary.sample_per_query.values() for m in values}


def ppi_tests(
    run: Evaluation, baseline: Baseline, measures: list[Measure], family: int
) -> dict[Measure, PairedTest]:
    """Per measure (each measured on the population), the PPI++ paired delta run - baseline as
    a PairedTest, among `family` measures decided together, not yet Holm-adjusted (`refusal`
    has passed)."""
    s = run.summary
    assert s.human_sample is not None
    return paired_ppi(
        (baseline.sample_per_query, s.sample_per_query),
        (baseline.llm_per_query, s.llm_per_query),
        s.human_sample,
        measures,
        run.rules.statistics,
        where=run.label,
        family=family,
    )


def paired_ppi(
    human: tuple[PerQuery, PerQuery],
    llm: tuple[PerQuery, PerQuery],
    sample: HumanSample,
    measures: Sequence[_M],
    stats: Statistics,
    *,
    where: str | None,
    family: int = 1,
) -> dict[_M, PairedTest]:
    """The gate's PairedTest per measure from (baseline, run) per-query values with human qrels
    on the drawn queries and LLM qrels on the whole frame: what `judge` decides under `ppi`
    (bench/operating_characteristics.py measures its error rates through this function). With
    `family` m > 1 measures decided together, its (1 - alpha/m) PPI++ interval bounds FAIL
    claims, as the bootstrap's does under `interval`."""
    from rageval_pipeline.core.statistics.ppi import as_paired_test, ppi_deltas

    def deltas(alpha: float) -> dict:
        return ppi_deltas(human, llm, sample, measures, alpha=alpha, power=stats.power, where=where)

    level = {"level": 1 - stats.alpha}
    tests = {m: as_paired_test(d).model_copy(update=level) for m, d in deltas(stats.alpha).items()}
    if family <= 1:
        return tests
    wide = deltas(stats.alpha / family)
    return {
        m: t.model_copy(update={"family_low": wide[m].ci_low, "family_high": wide[m].ci_high})
        for m, t in tests.items()
    }
