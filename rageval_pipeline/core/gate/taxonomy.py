"""The gate's regression taxonomy (docs/gate.md): the category a failed check is reported as.

A measure's drop is named by its family, which the measure carries: lost recall, relevant
results ranked lower, one source filling the list. The names are the gate's, not the
measures': a new measure needs no label, and a new label touches no measure.
"""

from __future__ import annotations

from typing import Literal, get_args

from rageval_pipeline.core.measures.names import Family, Measure

Category = Literal[
    "diversity_collapse",
    "latency_regression",
    "ranking_shift",
    "recall_drop",
    "semantic_degraded_spike",
    "unjudged_run",
    "unjudged_spike",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
# Coverage (Judged@k) has its own check, `unjudged_spike`; a budget (Tokens@k) is watched,
# never a regression.
FAMILY_CATEGORY: dict[Family, Category | None] = {
    "recall": "recall_drop",
    "ranking": "ranking_shift",
    "diversity": "diversity_collapse",
    "coverage": None,
    "budget": None,
}


def category_of(measure: Measure) -> Category | None:
    """The category a drop of `measure` is reported under; None: not a regression."""
    return FAMILY_CATEGORY[measure.family]
