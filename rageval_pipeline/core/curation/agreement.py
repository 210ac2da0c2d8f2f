"""How far two assessors' grades of the same (query, target) pairs agree: raw agreement, Cohen's
kappa with linear and quadratic weights (scikit-learn), binary kappa at grade >= 1 and >= 2, and
the 4x4 confusion table. A second pass is compared with the suite in `core.curation.third`,
and two judges' passes in `core.curation.readings`; neither resolves a disagreement by rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

GRADES = (0, 1, 2, 3)
BINARY = (False, True)


def kappa(
    first: Sequence[object],
    second: Sequence[object],
    weights: Literal["linear", "quadratic"] | None = None,
    labels: Sequence[object] = GRADES,
    sample_weight: Sequence[float] | None = None,
) -> float | None:
    """Cohen's kappa of two graders over the same items (scikit-learn), None when undefined
    (both graders used one and the same label throughout). `labels` fixes the scale, so that
    weights measure the distance on it (1 and 3 are two steps apart even when no 2 occurs).
    `sample_weight` weighs each item (a stratified sample weighted to its population)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(first) | set(second)) < 2:
        return None
    return float(
        cohen_kappa_score(
            first, second, labels=list(labels), weights=weights, sample_weight=sample_weight
        )
    )


class Figures(BaseModel):
    """How far two passes' grades of the same pairs agree."""

    pairs: int
    agree: int
    kappa_linear: float | None
    kappa_quadratic: float | None
    kappa_relevant: float | None  # binary, grade >= 1
    kappa_highly: float | None  # binary, grade >= 2
    confusion: list[list[int]]  # [first grade][second grade]

    @property
    def raw(self) -> float:
        return self.agree / self.pairs


def kappas(
    first: Sequence[int], second: Sequence[int], weights: Sequence[float] | None = None
) -> dict[str, float | None]:
    """The four kappas of `Figures` (and `Weighted`), items weighed by `weights`."""
    return {
        "kappa_linear": kappa(first, second, "linear", sample_weight=weights),
        "kappa_quadratic": kappa(first, second, "quadratic", sample_weight=weights),
        "kappa_relevant": kappa(
            [a >= 1 for a in first], [b >= 1 for b in second], None, BINARY, weights
        ),
        "kappa_highly": kappa(
            [a >= 2 for a in first], [b >= 2 for b in second], None, BINARY, weights
        ),
    }


def figures(first: Sequence[int], second: Sequence[int]) -> Figures:
    """Raw agreement, the kappas and the confusion table of two passes' grades, pair by pair."""
    confusion = [[0] * len(GRADES) for _ in GRADES]
    for a, b in zip(first, second, strict=True):
        confusion[a][b] += 1
    return Figures(
        pairs=len(first),
        agree=sum(a == b for a, b in zip(first, second, strict=True)),
        confusion=confusion,
        **kappas(first, second),
    )


class Weighted(BaseModel):
    """The figures of a weighted sample (a stratified one weighted to its population): the
    confusion table counts estimated pairs of the population."""

    pairs: int
    population: float
    raw: float
    kappa_linear: float | None
    kappa_quadratic: float | None
    kappa_relevant: float | None
    kappa_highly: float | None
    confusion: list[list[float]]


def weighted_figures(
    first: Sequence[int], second: Sequence[int], weights: Sequence[float]
) -> Weighted:
    """`figures` with each pair weighed (e.g. by the inverse of its stratum's sampling
    fraction, so that the figures estimate the population's)."""
    confusion = [[0.0] * len(GRADES) for _ in GRADES]
    for a, b, w in zip(first, second, weights, strict=True):
        confusion[a][b] += w
    total = float(sum(weights))
    return Weighted(
        pairs=len(first),
        population=total,
        raw=sum(w for a, b, w in zip(first, second, weights, strict=True) if a == b) / total,
        confusion=confusion,
        **kappas(first, second, weights),
    )
