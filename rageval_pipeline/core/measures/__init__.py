"""IR measures: named declarative objects (`names`) and their vectorised computation (`compute`)."""

from rageval_pipeline.core.measures.compute import evaluate, unjudged_queries
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
from rageval_pipeline.core.ranking import to_document_level

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
