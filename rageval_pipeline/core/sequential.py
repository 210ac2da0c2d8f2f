"""An anytime-valid confidence sequence for a mean paired delta that is looked at every night.

A 95% interval recomputed each night as queries accumulate, and acted on the first night it
excludes 0, is wrong far more often than 5% of the time: every look is another chance. A
confidence sequence covers the true mean at every look at once, with probability 1 - alpha, so
peeking nightly inflates nothing.

This is the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas
("Time-uniform central limit theory and asymptotic confidence sequences", Annals of Statistics
2024, Theorem 2.2, Robbins' normal mixture): after t per-query deltas with mean m_t and
standard deviation s_t,

    m_t ± s_t * sqrt( 2 (t rho² + 1) / (t² rho²) * log( sqrt(t rho² + 1) / alpha ) )

with rho tuned to be tightest at `planned` deltas. Written out here because neither library
with it installs on this project's Python: `confseq` (0.0.11) fails to build from its sdist,
and `expectation` needs Python >= 3.12.
"""

from __future__ import annotations

import numpy as np

from rageval_pipeline.core.statistics import DEFAULT_ALPHA


def mixture_rho(planned: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The mixture width that makes the sequence tightest after `planned` observations (the
    paper's eq. for rho*)."""
    log_term = -2 * np.log(alpha)
    return float(np.sqrt((log_term + np.log(log_term + 1)) / planned))


def confidence_sequence(
    deltas: np.ndarray, *, planned: int, alpha: float = DEFAULT_ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """The (1 - alpha) confidence sequence after each of the per-query `deltas`, in arrival
    order (the last axis; leading axes are independent sequences): (low, high), each one value
    per prefix, NaN before two deltas."""
    x = np.asarray(deltas, dtype=float)
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = np.cumsum(x, axis=-1) / t
    var = np.maximum(np.cumsum(x * x, axis=-1) / t - mean**2, 0.0)
    rho2 = mixture_rho(planned, alpha) ** 2
    radius = np.sqrt(var) * np.sqrt(
        2 * (t * rho2 + 1) / (t**2 * rho2) * np.log(np.sqrt(t * rho2 + 1) / alpha)
    )
    radius = np.where(t >= 2, radius, np.nan)
    return mean - radius, mean + radius
