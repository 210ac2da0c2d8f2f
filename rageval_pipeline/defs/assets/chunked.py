"""The corpus chunked as a step needs it: read from a stored `<system>/chunks` table that chunks
so, instead of chunking the corpus again (the evidence of a run's metrics, qrels coverage, a
reranker's texts, the baseline configuration beside a changed one, the gate's snippets,
reference answers and synthetic queries).

A chunking no stored table holds (the suite's reference chunking beside a system that chunks
otherwise, or an outside system that returns the reference's chunk ids) is chunked in the step,
once per process (`core.suites.chunking.chunk_once`), not stored as an asset of its own: it
costs a fraction of a second on the bundled suites, while an asset would add a step and an edge
to every system's chain for each dataset.
"""

from collections.abc import Iterable, Iterator

import pandas as pd

from rageval_pipeline.core.storage.location import read_parquet
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once
from rageval_pipeline.core.systems import SystemConfig
from rageval_pipeline.defs.resources import Settings, stored_path


def _indexed(system: SystemConfig) -> Iterator[SystemConfig]:
    """The indexed systems behind `system`: itself, or its members (fusions, rerankers)."""
    if system.indexed:
        yield system
    for name in system.member_names:
        yield from _indexed(system.member(name))


def stored_chunks(
    settings: Settings, dataset: str, systems: Iterable[str], columns: list[str] | None = None
) -> pd.DataFrame | None:
    """The first of `systems`' stored `<system>/chunks` tables of `dataset` (only `columns`,
    when given); None when none is stored."""
    for name in systems:
        path = stored_path(settings.storage, [name, "chunks"], dataset)
        if path.is_file():
            return read_parquet(path, columns=columns).to_pandas()
    return None


def chunked(
    settings: Settings,
    dataset: str,
    corpus: pd.DataFrame,
    chunking: ChunkingConfig,
    reference: ChunkingConfig | None,
    *systems: SystemConfig,
) -> pd.DataFrame:
    """`corpus` chunked by `chunking`: the stored chunks of an indexed system behind `systems`
    that chunks alike, else chunked once in this process (the same ids and offsets either
    way)."""
    alike = (
        s.name
        for named in systems
        for s in _indexed(named)
        if s.name and s.chunking.resolve(reference) == chunking
    )
    found = stored_chunks(settings, dataset, alike)
    return chunk_once(corpus, chunking) if found is None else found
