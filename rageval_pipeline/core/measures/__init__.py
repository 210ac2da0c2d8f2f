"""IR measures: named declarative objects (`names`) and their vectorised computation (`compute`).

Every name here is imported on first use, so importing a submodule costs only that submodule:
the id fingerprints (`keys`), which the run readers use, need neither pydantic (`names`, 0.15 s)
nor pandas (`compute`, 0.4 s), and `rageval eval` starts reading its run before either loads.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rageval_pipeline.core.io.ranking import to_document_level
    from rageval_pipeline.core.measures.compute import evaluate, unjudged_queries
    from rageval_pipeline.core.measures.names import (
        FAMILIES,
        Family,
        Measure,
        MeasureName,
        canonical,
        parse_measure,
        sort_key,
        try_parse,
    )

# Where each name lives that is not in `names`.
_ELSEWHERE = {
    "evaluate": "rageval_pipeline.core.measures.compute",
    "unjudged_queries": "rageval_pipeline.core.measures.compute",
    "to_document_level": "rageval_pipeline.core.io.ranking",
}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = _ELSEWHERE.get(name, "rageval_pipeline.core.measures.names")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "FAMILIES",
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
