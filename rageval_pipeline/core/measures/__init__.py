"""IR measures: named declarative objects (`names`) and their vectorised computation (`compute`).

The computation (pandas, numpy) is imported on first use of `evaluate`, `unjudged_queries` or
`to_document_level`: naming a measure (`rageval eval -m`, parsed before any file is read) and
the id fingerprints (`keys`, which a reader thread uses while pandas imports) need none of it.
"""

from typing import TYPE_CHECKING

from rageval_pipeline.core.measures.names import (
    FAMILIES,
    Category,
    Family,
    Measure,
    MeasureName,
    canonical,
    parse_measure,
    sort_key,
    try_parse,
)

if TYPE_CHECKING:
    from rageval_pipeline.core.measures.compute import evaluate, unjudged_queries
    from rageval_pipeline.core.ranking import to_document_level

_LAZY = {
    "evaluate": "rageval_pipeline.core.measures.compute",
    "unjudged_queries": "rageval_pipeline.core.measures.compute",
    "to_document_level": "rageval_pipeline.core.ranking",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = [
    "FAMILIES",
    "Category",
    "Family",
    "Measure",
    "MeasureName",
    "canonical",
    "evaluate",
    "parse_measure",
    "sort_key",
    "to_document_level",
    "try_parse",
    "unjudged_queries",
]
