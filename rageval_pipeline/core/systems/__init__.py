"""Named system configurations (retriever + chunking + parameters) and what runs them.

`load_systems` reads `systems: {name: {...}}` from YAML into a discriminated union on
`retriever`. Each system has a `fingerprint()`: 16 hex chars of the SHA-256 of the canonical
JSON of everything that changes its results, so stored runs can be reused exactly when nothing
that matters changed (see docs/systems.md).
"""

from rageval_pipeline.core.systems.base import Log, RunInputs
from rageval_pipeline.core.systems.catalog import (
    SystemConfig,
    SystemsFile,
    indexed_system,
    load_systems,
)
from rageval_pipeline.core.systems.combined import RerankSystem, RRFSystem, WeightedSystem
from rageval_pipeline.core.systems.external import HttpSystem, PythonSystem, RunFileSystem
from rageval_pipeline.core.systems.indexed import TIMING_SAMPLE, BM25System, DenseSystem

__all__ = [
    "TIMING_SAMPLE",
    "BM25System",
    "DenseSystem",
    "HttpSystem",
    "Log",
    "PythonSystem",
    "RRFSystem",
    "RerankSystem",
    "RunFileSystem",
    "RunInputs",
    "SystemConfig",
    "SystemsFile",
    "WeightedSystem",
    "indexed_system",
    "load_systems",
]
