"""The corpus chunked as a step needs it: read from a stored `<system>/chunks` table that chunks
so, instead of chunking the corpus again (the evidence of a run's metrics, qrels coverage, a
reranker's texts, the baseline configuration beside a changed one, the gate's snippets,
reference answers, synthetic queries and the systems the LLM-label steps pool).

A stored table is read only when it is fresh: its `.key` stamp is the content key
(`chunks_key`) of the stored corpus as it is now, chunked by that chunking under the system's
chunks code version. A system not materialized in this run may hold chunks of an older corpus
(the suite's documents edited and `ingest` run again) or of older chunking code; those are
never read: the step chunks the current corpus instead, so nothing is scored on old text.

A chunking no fresh table holds (the suite's reference chunking beside a system that chunks
otherwise, or an outside system that returns the reference's chunk ids) is chunked in the step,
once per process (`core.suites.chunking.chunk_once`), not stored as an asset of its own: it
costs a fraction of a second on the bundled suites, while an asset would add a step and an edge
to every system's chain for each dataset.
"""

import logging
from collections.abc import Iterable, Iterator
from functools import cache

import pandas as pd

from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.suites.chunking import ChunkingConfig, StoredChunks, chunk_once
from rageval_pipeline.core.systems import SystemConfig
from rageval_pipeline.defs.resources import Settings, StoredTable, stored_path

# Bump when the Dagster layer changes what the chunks asset produces beyond the chunking.
CHUNKS_VERSION = "2"  # 2: chunks carry their extent (start, end)

log = logging.getLogger(__name__)


def chunks_version(system: SystemConfig) -> str:
    """The code version of an indexed system's `<system>/chunks`: its chunking as configured
    and the code that chunks (nothing else of the system's configuration)."""
    chunking = content_key(system.chunking.model_dump(mode="json"))[:16]
    return f"{chunking}.{CHUNKS_VERSION}"


def chunks_key(system: SystemConfig, chunking: ChunkingConfig, corpus_key: str) -> str:
    """The content key of `system`'s chunks of the corpus stored under `corpus_key`, chunked by
    `chunking` (its own, resolved against the suite's reference): what the chunks asset stamps
    its table with, and what a reader expects of a fresh one."""
    return content_key(chunks_version(system), chunking.model_dump(mode="json"), corpus_key)


def _indexed(system: SystemConfig) -> Iterator[SystemConfig]:
    """The indexed systems behind `system`: itself, or its members (fusions, rerankers)."""
    if system.indexed:
        yield system
    for name in system.member_names:
        yield from _indexed(system.member(name))


def _stored(settings: Settings, dataset: str, system: SystemConfig) -> StoredTable:
    return StoredTable(stored_path(settings.storage, [system.name, "chunks"], dataset))


def _fresh_table(
    settings: Settings,
    dataset: str,
    corpus: StoredTable,
    chunking: ChunkingConfig,
    systems: Iterable[SystemConfig],
) -> pd.DataFrame | None:
    """The first of `systems`' stored `<system>/chunks` tables of `dataset` that holds `corpus`
    (as stored now) chunked by `chunking`; None when none does."""
    for system in {s.name: s for s in systems}.values():
        table = _stored(settings, dataset, system)
        if (stamp := table.stamp) is None or not table.path.is_file():
            continue
        if stamp == chunks_key(system, chunking, corpus.key):
            return table.frame
        log.debug("%s/chunks of %s: made from another corpus or code", system.name, dataset)
    return None


def stale_chunks(
    settings: Settings,
    dataset: str,
    corpus: StoredTable,
    reference: ChunkingConfig | None,
    system: SystemConfig,
) -> list[str]:
    """The indexed systems behind `system` whose stored chunks (what their index, hence the
    run, was built from) are not of `corpus` as stored now: the corpus was ingested again and
    their chain was not, so the run's chunk ids may name other text. (A chain materialized in
    part after the corpus, chunks but not the run, is what Dagster's UI shows as stale.)"""
    stale = []
    for s in {s.name: s for s in _indexed(system) if s.name}.values():
        stamp = _stored(settings, dataset, s).stamp
        if stamp is not None and stamp != chunks_key(s, s.run_chunking(reference), corpus.key):
            stale.append(s.name)
    return stale


def chunked(
    settings: Settings,
    dataset: str,
    corpus: StoredTable,
    chunking: ChunkingConfig,
    reference: ChunkingConfig | None,
    *systems: SystemConfig,
) -> pd.DataFrame:
    """The stored `corpus` chunked by `chunking`: the fresh stored chunks of an indexed system
    behind `systems` that chunks alike, else chunked once in this process (the same ids and
    offsets either way)."""
    alike = (
        s
        for named in systems
        for s in _indexed(named)
        if s.name and s.run_chunking(reference) == chunking
    )
    found = _fresh_table(settings, dataset, corpus, chunking, alike)
    return chunk_once(corpus.frame, chunking) if found is None else found


def from_storage(
    settings: Settings,
    dataset: str,
    corpus: StoredTable,
    reference: ChunkingConfig | None,
    *systems: SystemConfig,
) -> StoredChunks:
    """What a step hands the core as its stored chunks (`StoredChunks`): `chunked` by each
    chunking asked for, read once in the step (a reranker over a fusion asks once per member)."""
    return cache(lambda chunking: chunked(settings, dataset, corpus, chunking, reference, *systems))
