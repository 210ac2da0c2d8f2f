"""A distribution-free lower bound on a median, for latency ratios of interleaved pairs.

Each query is timed through the system and through the baseline's configuration back to back,
in alternating order (`core.retrieval.base.execute`), so both timings of a pair share the
machine's load. The per-query log ratio then carries the change and little of the load, but
its distribution is skewed and heavy-tailed (a query preempted by another process), so the
bound is the sign test's: the k-th smallest value, with k from the binomial(n, 1/2) tail. One
outlier moves it by at most one rank; no normality is assumed. Checked against scipy's
`binomtest` in tests/test_latency_noise.py.
"""

from __future__ import annotations

import numpy as np


def median_lower_bound(values: np.ndarray, level: float = 0.95) -> float | None:
    """The one-sided `level` lower confidence bound of the median of `values` (sign test);
    None when there are too few values for any bound (n < 5 at 95%)."""
    from scipy.stats import binom  # loaded only where latency is aggregated

    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    # P(X_(k) <= median) = P(Binomial(n, 1/2) >= k): the largest k whose miss rate
    # P(Binomial <= k - 1) stays within 1 - level.
    k = int(np.searchsorted(binom.cdf(np.arange(n), n, 0.5), 1 - level, side="right"))
    return float(ordered[k - 1]) if k >= 1 else None
