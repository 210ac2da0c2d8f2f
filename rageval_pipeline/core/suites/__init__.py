"""Datasets as the pipeline sees them: golden suites (`golden`, their queries
in `queries` and the stamps of the files read in `stamps`), BEIR folders and suites loaded
into tables (`loaders`), chunking with stable ids (`chunking`), how a judgment names a document
or chunk (`matching`), comparability conventions (`conventions`) and judgment consistency
(`consistency`); evidence spans, their anchoring against drift and the reference chunking's
extents (`spans`, `evidence`), and the field types every suite model shares (`fields`).
"""

from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus, chunk_once
from rageval_pipeline.core.suites.golden import Suite, load_suite, resolve_suite_file
from rageval_pipeline.core.suites.loaders import Dataset, load_dataset, suite_tables

__all__ = [
    "ChunkingConfig",
    "Dataset",
    "Suite",
    "chunk_corpus",
    "chunk_once",
    "load_dataset",
    "load_suite",
    "resolve_suite_file",
    "suite_tables",
]
