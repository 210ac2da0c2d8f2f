"""How measured values are rounded where people read them: Dagster metadata and baselines."""

from __future__ import annotations

METRIC_DIGITS = 6


def round_metric(value: float) -> float:
    """`value` to 6 decimals, so 0.39599999999999996 reads 0.396 (and -0.0 reads 0.0)."""
    return round(float(value), METRIC_DIGITS) + 0.0
