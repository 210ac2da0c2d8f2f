"""Rounding measured values where people read them (core.numbers)."""

from __future__ import annotations

import math

import numpy as np

from rageval_pipeline.core.numbers import round_metric, round_metrics


def test_round_metrics_equals_round_metric_on_every_value():
    rng = np.random.default_rng(7)
    halfway = rng.integers(0, 10**7, 20_000) / 10**7 + 5e-7  # at or next to x.xxxxxx5
    special = [0.0, -0.0, -1e-9, 0.39599999999999996, 2.5e-7, 1e300, math.inf, 1234567.0000005]
    values = np.concatenate([rng.random(20_000), halfway, special])
    got = round_metrics(values)
    assert [repr(v) for v in got] == [repr(round_metric(v)) for v in values]
    assert repr(round_metrics(np.array([math.nan]))[0]) == "nan"
