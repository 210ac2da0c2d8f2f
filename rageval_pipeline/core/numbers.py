"""How measured values are rounded where people read them: Dagster metadata and baselines."""

from __future__ import annotations

import numpy as np

METRIC_DIGITS = 6


def round_metric(value: float) -> float:
    """`value` to 6 decimals, so 0.39599999999999996 reads 0.396 (and -0.0 reads 0.0)."""
    return round(float(value), METRIC_DIGITS) + 0.0


def round_metrics(values: np.ndarray) -> list[float]:
    """`round_metric` of each value, vectorised. numpy rounds x * 10**6 (itself rounded), so a
    value within reach of a half-way point is rounded by Python's exact `round` instead."""
    values = np.asarray(values, dtype=float)
    scaled = values * 10.0**METRIC_DIGITS
    out = np.round(scaled) / 10.0**METRIC_DIGITS + 0.0
    with np.errstate(invalid="ignore"):  # inf and NaN go to `round_metric` below
        near_half = np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-6
    doubtful = near_half | ~(np.abs(scaled) < 2.0**52)
    for i in np.flatnonzero(doubtful):
        out[i] = round_metric(values[i])
    return out.tolist()
