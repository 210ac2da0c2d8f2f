"""IR measures: named declarative objects (`names`) and their vectorised computation (`compute`)."""

from rageval_pipeline.core.measures.compute import (
    evaluate,
    to_document_level,
    unjudged_queries,
)
from rageval_pipeline.core.measures.names import FAMILIES, Measure, parse_measure

__all__ = [
    "FAMILIES",
    "Measure",
    "evaluate",
    "parse_measure",
    "to_document_level",
    "unjudged_queries",
]
