"""The common system model: what a run may need, the fingerprint and member resolution."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, PrivateAttr

from rageval_pipeline.core.retrieval.base import Retriever
from rageval_pipeline.core.suites.chunking import ChunkingConfig, StoredChunks, chunks_of

Log = Callable[[str], None]  # where a long build reports its progress


@dataclass(frozen=True)
class RunInputs:
    """What producing a run may need; each system kind reads its own part."""

    queries: pd.DataFrame  # the judged queries: query_id, text
    top_k: int
    index_dir: Path  # where an indexed system's index lives
    base_dir: Path  # the systems file's folder (run files, entry point modules)
    member_runs: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    corpus: pd.DataFrame | None = None  # what a reranker reads (with `reference`)
    reference: ChunkingConfig | None = None  # the suite's reference chunking
    # The corpus chunked by a chunking, as the caller has it stored (the pipeline's
    # `<system>/chunks`); None: chunked once in this process (`chunked`).
    stored_chunks: StoredChunks | None = None
    embeddings_dir: Path | None = None  # the embedding cache (dense re-scoring)
    # The baseline's configuration, opened: timed beside this system on every query, so that
    # latency is compared on one machine under one load (see retrieval.base.execute).
    baseline: Retriever | None = None

    def chunked(self, chunking: ChunkingConfig) -> pd.DataFrame:
        """The corpus chunked by `chunking` (`chunks_of`), for a system that reads the corpus."""
        if self.corpus is None:
            raise ValueError("RunInputs.corpus: a system that reads the corpus is given it")
        return chunks_of(self.corpus, chunking, self.stored_chunks)


class _System(BaseModel, ABC):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # False when the answers come from outside (a live service): a run is never reused then.
    reusable: ClassVar[bool] = True
    reads_corpus: ClassVar[bool] = False  # True when producing a run reads the documents' text
    _name: str | None = PrivateAttr(None)
    # The configurations of `member_names` by name, set by `load_systems` once all are known.
    _members: dict[str, _System] = PrivateAttr(default_factory=dict)

    @property
    def name(self) -> str | None:
        """The name it has in its systems file (set by `load_systems`; not in the fingerprint)."""
        return self._name

    def fingerprint(self) -> str:
        canonical = json.dumps(self._identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def _identity(self) -> dict:
        """What changes results; by default every field."""
        return self.model_dump(mode="json")

    # --- running: each kind overrides what applies to it ----------------------------------

    @property
    def member_names(self) -> list[str]:
        """The systems whose runs this one reads (fusion members, a reranker's candidates)."""
        return []

    def member(self, name: str) -> _System:
        if name not in self._members:
            raise ValueError(f"member {name!r} is not resolved; load systems with load_systems")
        return self._members[name]

    @property
    def indexed(self) -> bool:
        """Whether it chunks the corpus and builds an index before it can run."""
        return False

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        """Chunk-level judgments apply only when every chunking behind the run is the suite's
        reference chunking (see core.results.store)."""
        return False

    def run_chunking(self, reference: ChunkingConfig | None) -> ChunkingConfig | None:
        """The chunking whose chunk ids the run returns, which evidence spans judge
        (core.suites.derived); None when it returns documents or ids of unknown extent."""
        return None

    def returns_suite_chunks(
        self, run: pd.DataFrame, reference: ChunkingConfig | None, corpus: pd.DataFrame
    ) -> bool:
        """Whether the run's ids are the suite's reference chunks though nothing says so in
        the configuration (an outside system's, `external`): then it is scored like a system
        chunked by the reference, at chunk level."""
        return False

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        """The configuration stored with a run."""
        return self.model_dump(mode="json")

    @abstractmethod
    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        """The RUN table of this system on `inputs.queries`."""
