"""The warehouse rows of a PPI evaluation: `ppi_metrics` and `label_query_metrics`
(warehouse_schema), beside the run's human-judged `run_metrics` and `query_metrics`.

The population may be the suite's own queries (`rageval eval --llm-qrels`) or a companion set
beside it (docs/synthetic.md); `label_query_metrics` then holds the per-query values on the
drawn queries with human qrels ('human') as well as those on every query with LLM qrels
('llm'), so that the suite's own `query_metrics` stay the suite's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rageval_pipeline.core.statistics.paired import DEFAULT_ALPHA
from rageval_pipeline.core.statistics.ppi import PpiEstimate, by_query, nested, z_value
from rageval_pipeline.core.statistics.sampling import HumanSample

HUMAN, LLM, PPI = "human", "llm", "ppi"  # label sources


def ppi_tables(
    estimates: dict[str, PpiEstimate],
    llm_per_query: pd.DataFrame,
    sample: HumanSample,
    human_per_query: pd.DataFrame,
    *,
    alpha: float = DEFAULT_ALPHA,
) -> dict[str, pd.DataFrame]:
    """Rows without the run's keys (`results.store_results` adds them): per measure the PPI++
    estimate and, for comparison, the LLM labels taken as truth on the whole frame (a normal
    interval, which the judge's bias makes invalid: docs/statistics.md); and the per-query
    values with LLM qrels on every query and with human qrels on the drawn ones (of
    `human_per_query`)."""
    frame, by_llm = sorted(sample.frame), nested(llm_per_query)
    source = {"sample_seed": sample.seed, "frame_sha256": sample.frame_digest()}
    rows = []
    for measure, e in estimates.items():
        rows.append(
            {"label_source": PPI, "measure": measure, "value": e.estimate}
            | {"ci_low": e.ci_low, "ci_high": e.ci_high, "n_human": e.n_human, "n_llm": e.n_llm}
            | {"effective_n": e.effective_n, "mde": e.mde, "mde_human": e.mde_human}
            | source
        )
        values = by_query(by_llm, measure, frame)
        half = z_value(alpha) * values.std() / np.sqrt(len(values))
        rows.append(
            {"label_source": LLM, "measure": measure, "value": values.mean()}
            | {"ci_low": values.mean() - half, "ci_high": values.mean() + half}
            | {"n_human": None, "n_llm": len(values)}
            | source
        )
    columns = ["query_id", "measure", "value"]
    per_query = llm_per_query[columns].assign(label_source=LLM)
    drawn = human_per_query[human_per_query["query_id"].isin(sample.drawn())]
    per_query = pd.concat([drawn[columns].assign(label_source=HUMAN), per_query], ignore_index=True)
    return {"ppi_metrics": pd.DataFrame(rows), "label_query_metrics": per_query}


def population_tables(
    run: pd.DataFrame,
    human: pd.DataFrame,
    llm: pd.DataFrame,
    queries: pd.DataFrame,
    sample: HumanSample,
    *,
    chunk_level: bool,
    where: str,
) -> dict[str, pd.DataFrame]:
    """The PPI rows of a run over a population beside its suite (a companion set): measured
    with human qrels on the drawn queries and with LLM qrels on every query, as the suite is
    (`measure_run`). The draw is checked first (`check_drawn`: refused in one line). A query
    the LLM labelled nothing of (every verdict unparseable, so left out of its qrels) scores 0,
    as an unparseable verdict is never relevant (docs/synthetic.md). A measure that some drawn
    query has no human value for (judged, nothing relevant) gets no estimate: the gate refuses
    it, in one line, if it compares it (`ppi.sampled_values`)."""
    from rageval_pipeline.core.results.store import measure_run
    from rageval_pipeline.core.statistics.ppi import ppi_means
    from rageval_pipeline.core.statistics.sampling import check_drawn

    check_drawn(sample, set(human["query_id"]), where=where)
    by_human = measure_run(run, human, queries, chunk_level=chunk_level)
    by_llm = measure_run(run, llm, queries, chunk_level=chunk_level)
    drawn = by_human.per_query[by_human.per_query["query_id"].isin(sample.drawn())]
    counts = drawn.groupby("measure")["query_id"].nunique()
    complete = [m for m in by_human.means["measure"] if counts.get(m, 0) == sample.size]
    estimates = ppi_means(nested(drawn), nested(by_llm.per_query), sample, complete, where=where)
    return ppi_tables(estimates, by_llm.per_query, sample, by_human.per_query)
