"""Everything one evaluated run produces (per-query, mean, breakdown and latency tables), the
suite digest that says whether two runs saw the same suite, and where results are stored.
"""

from rageval_pipeline.core.results.store import (
    METRICS_VERSION,
    RunResults,
    measure_run,
    store_results,
    suite_digest,
)

__all__ = ["METRICS_VERSION", "RunResults", "measure_run", "store_results", "suite_digest"]
