"""Paired statistics on per-query values, the one home for the gate and `rageval compare`:
bootstrap intervals, the paired randomization test, Holm's correction and the minimum
detectable effect (`paired`), and run-against-run comparison (`compare`, imported on its own:
it loads scipy, which the gate's models do not need).
"""

from rageval_pipeline.core.statistics.paired import (
    PairedTest,
    bootstrap_ci,
    holm,
    minimum_detectable_effect,
    paired_test,
    randomization_p,
    with_holm,
)

__all__ = [
    "PairedTest",
    "bootstrap_ci",
    "holm",
    "minimum_detectable_effect",
    "paired_test",
    "randomization_p",
    "with_holm",
]
