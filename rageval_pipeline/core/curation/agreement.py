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
) -> float | None:
    """Cohen's kappa of two graders over the same items (scikit-learn), None when undefined
    (both graders used one and the same label throughout). `labels` fixes the scale, so that
    weights measure the distance on it (1 and 3 are two steps apart even when no 2 occurs)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(first) | set(second)) < 2:
        return None
    return float(cohen_kappa_score(first, second, labels=list(labels), weights=weights))


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


def figures(first: Sequence[int], second: Sequence[int]) -> Figures:
    """Raw agreement, the kappas and the confusion table of two passes' grades, pair by pair."""
    confusion = [[0] * len(GRADES) for _ in GRADES]
    for a, b in zip(first, second, strict=True):
        confusion[a][b] += 1
    return Figures(
        pairs=len(first),
        agree=sum(a == b for a, b in zip(first, second, strict=True)),
        kappa_linear=kappa(first, second, "linear"),
        kappa_quadratic=kappa(first, second, "quadratic"),
        kappa_relevant=kappa([a >= 1 for a in first], [b >= 1 for b in second], labels=BINARY),
        kappa_highly=kappa([a >= 2 for a in first], [b >= 2 for b in second], labels=BINARY),
        confusion=confusion,
    )
