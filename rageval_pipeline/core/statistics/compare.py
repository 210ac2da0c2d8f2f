"""Comparing two runs measure by measure on paired per-query values.

For each measure: the mean difference (B - A) with a 95% paired bootstrap interval, a paired
t-test and a paired randomization test (sign flips of the per-query differences, fixed seed;
Smucker, Allan & Carterette 2007), both two-sided, each Holm-corrected across the measures
compared (Holm 1979), so that testing many measures does not inflate false alarms. The
bootstrap, randomization test and Holm correction are `core.statistics`, shared with the gate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats

from rageval_pipeline.core.io.chunk_ids import is_chunk_id
from rageval_pipeline.core.statistics.paired import holm, paired_test
from rageval_pipeline.core.suites.matching import Level

COLUMNS = [
    "measure",
    "n_queries",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "p_ttest",
    "p_randomization",
    "p_ttest_holm",
    "p_randomization_holm",
]


def scored_level(retrieved: pa.Array | pd.Series) -> Level:
    """The level a run is scored at: chunk when every retrieved id is a chunk id
    (`doc:chunk:n`), as for qrels (never a guess from some of the ids), else document."""
    ids = pc.unique(pa.array(retrieved)).drop_null().to_pandas()
    return "chunk" if len(ids) and is_chunk_id(ids).all() else "document"


def mixed_levels(level_a: Level, level_b: Level) -> str | None:
    """Why two runs scored at these levels cannot be compared; None when they can."""
    if level_a == level_b:
        return None
    return (
        f"run A is scored at {level_a} level and run B at {level_b} level: their measures rank "
        "different units (documents vs chunks) and are not comparable; compare runs of one "
        "level (--document-level ranks a pipeline run's documents by their best chunk)"
    )


def _paired(a: np.ndarray, b: np.ndarray, permutations: int, seed: int) -> dict:
    test = paired_test(a, b, resamples=permutations, seed=seed)
    row = {"n_queries": test.n, "mean_a": a.mean(), "mean_b": b.mean(), "delta": test.delta}
    row |= {"ci_low": test.ci_low, "ci_high": test.ci_high, "p_randomization": test.p_value}
    diff = b - a
    if len(diff) < 2:
        return row | {"p_ttest": np.nan}
    if np.all(diff == diff[0]):  # no spread: t is undefined, its limit is not
        return row | {"p_ttest": 1.0 if diff[0] == 0 else 0.0}
    return row | {"p_ttest": stats.ttest_rel(b, a).pvalue}


def compare_runs(
    per_query_a: pd.DataFrame,
    per_query_b: pd.DataFrame,
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired comparison of two per-query tables (query_id, measure, value); one row a measure.

    Only queries present in both tables for a measure are paired (`n_queries`); `delta` is
    mean(B - A). Measures come in A's order. Same inputs and seed give the same p-values.
    """
    paired = per_query_a.merge(
        per_query_b, on=["query_id", "measure"], suffixes=("_a", "_b"), sort=False
    )
    rows = []
    for measure, part in paired.groupby("measure", sort=False):
        # The same seed per measure: its p-value does not depend on the others.
        a, b = part["value_a"].to_numpy(float), part["value_b"].to_numpy(float)
        rows.append({"measure": str(measure)} | _paired(a, b, permutations, seed))
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if not c.endswith("_holm")])
    frame["p_ttest_holm"] = holm(frame["p_ttest"].to_numpy(float))
    frame["p_randomization_holm"] = holm(frame["p_randomization"].to_numpy(float))
    return frame.astype({"measure": str, "n_queries": np.int64})[COLUMNS]
