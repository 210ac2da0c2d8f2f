"""The warehouse rows of a PPI evaluation: `ppi_metrics` and `label_query_metrics`
(warehouse_schema), beside the run's human-judged `run_metrics` and `query_metrics`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rageval_pipeline.core.ppi import PpiEstimate, by_query, nested, z_value
from rageval_pipeline.core.sampling import HumanSample
from rageval_pipeline.core.statistics import DEFAULT_ALPHA

LLM, PPI = "llm", "ppi"  # label sources besides the human one


def ppi_tables(
    estimates: dict[str, PpiEstimate],
    llm_per_query: pd.DataFrame,
    sample: HumanSample,
    *,
    alpha: float = DEFAULT_ALPHA,
) -> dict[str, pd.DataFrame]:
    """Rows without the run's keys (`results.store_results` adds them): per measure the PPI++
    estimate and, for comparison, the LLM labels taken as truth on the whole frame (a normal
    interval, which the judge's bias makes invalid: docs/statistics.md); and the per-query
    values with LLM qrels."""
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
    per_query = llm_per_query[["query_id", "measure", "value"]].assign(label_source=LLM)
    return {"ppi_metrics": pd.DataFrame(rows), "label_query_metrics": per_query}
