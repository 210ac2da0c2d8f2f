"""IR measures: named declarative objects (`names`) and their vectorised computation (`compute`)."""

from rageval_pipeline.core.measures.compute import evaluate, unjudged_queries
from rageval_pipeline.core.measures.names import FAMILIES, Measure, parse_measure
from rageval_pipeline.core.ranking import to_document_level

__all__ = [
    "FAMILIES",
    "Measure",
    "evaluate",
    "parse_measure",
    "to_document_level",
    "unjudged_queries",
]
