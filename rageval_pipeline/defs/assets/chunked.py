"""The corpus chunked as a run returns it: read from a stored `<system>/chunks` table that
chunks so, instead of chunking the corpus again (the evidence of a run's metrics, the baseline
configuration beside a changed one)."""

from collections.abc import Iterator

import pandas as pd

from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.systems import SystemConfig
from rageval_pipeline.defs.resources import Settings, stored_path


def _indexed(system: SystemConfig) -> Iterator[SystemConfig]:
    """The indexed systems behind `system`: itself, or its members (fusions, rerankers)."""
    if system.indexed:
        yield system
    for name in system.member_names:
        yield from _indexed(system.member(name))


def chunked(
    settings: Settings,
    dataset: str,
    corpus: pd.DataFrame,
    chunking: ChunkingConfig,
    reference: ChunkingConfig | None,
    *systems: SystemConfig,
) -> pd.DataFrame:
    """`corpus` chunked by `chunking`: the stored chunks of an indexed system behind `systems`
    that chunks alike, else chunked here (the same ids and offsets either way)."""
    for system in (s for named in systems for s in _indexed(named)):
        if system.name and system.chunking.resolve(reference) == chunking:
            path = stored_path(settings.storage, [system.name, "chunks"], dataset)
            if path.is_file():
                return settings.stored(system.name, "chunks", partition=dataset).frame
    return chunk_corpus(corpus, chunking, "")
