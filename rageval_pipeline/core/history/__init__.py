"""The warehouse read back: evaluated runs as the gate's `RunSummary` models (`summaries`) and
the experiments log of every gated evaluation with what changed (`experiments`).
"""

from rageval_pipeline.core.history.summaries import (
    history,
    measure_history,
    select_runs,
    summaries,
)

__all__ = ["history", "measure_history", "select_runs", "summaries"]
