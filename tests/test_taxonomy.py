"""The regression taxonomy is the gate's: measures carry their family, the gate maps a family
to the category a drop is reported under (docs/gate.md, "Measures and their direction")."""

from __future__ import annotations

import pytest

from rageval_pipeline.core.gate import CATEGORIES, FAMILY_CATEGORY, category_of
from rageval_pipeline.core.measures import FAMILIES, parse_measure


def test_no_measure_class_carries_a_category():
    assert [n for n, cls in FAMILIES.items() if hasattr(cls, "CATEGORY")] == []


def test_every_family_has_a_category_of_the_taxonomy_or_none():
    assert {cls.FAMILY for cls in FAMILIES.values()} <= set(FAMILY_CATEGORY)
    assert {c for c in FAMILY_CATEGORY.values() if c} <= set(CATEGORIES)


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("R@100", "recall_drop"),
        ("F1@10", "recall_drop"),
        ("EvidenceRecall@512t", "recall_drop"),
        ("nDCG@10", "ranking_shift"),
        ("TokenPrecision@5", "ranking_shift"),
        ("Clustering@10", "diversity_collapse"),
        ("Judged@10", None),
        ("Tokens@5", None),
    ],
)
def test_a_drop_is_named_by_the_measures_family(name, category):
    assert category_of(parse_measure(name)) == category
