"""Systems over other systems' runs: fusion (rrf, weighted) and rerank."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import pandas as pd
from pydantic import Field

from rageval_pipeline.core.retrieval import fusion, rerank
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.systems.base import RunInputs, _System


class _Fusion(_System):
    level: fusion.Level = "chunk"

    @property
    def member_names(self) -> list[str]:
        return list(self.members)

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        return all(self.member(m).chunk_level(reference) for m in self.members)

    def run_chunking(self, reference: ChunkingConfig | None) -> ChunkingConfig | None:
        """The members' one chunking when fused at chunk level (else ids would be ambiguous)."""
        chunkings = {self.member(m).run_chunking(reference) for m in self.members}
        return chunkings.pop() if self.level == "chunk" and len(chunkings) == 1 else None

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        """Each member's configuration as run, under its name (with its weight, if weighted),
        so that a change to a member shows in the fused system's recorded changes too."""
        weights = self.members if isinstance(self.members, dict) else {}
        members = {
            m: self.member(m).recorded_config(reference)
            | ({"weight": weights[m]} if weights else {})
            for m in self.members
        }
        return self.model_dump(mode="json") | {"members": members}

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        missing = [m for m in self.members if m not in inputs.member_runs]
        if missing:
            raise ValueError(f"no run for member(s) {missing}")
        return self._fuse([inputs.member_runs[m] for m in self.members])

    @abstractmethod
    def _fuse(self, runs: list[pd.DataFrame]) -> pd.DataFrame:
        """The fused run of the members' runs, in member order."""


class RRFSystem(_Fusion):
    retriever: Literal["rrf"]
    members: list[str] = Field(min_length=2)
    k: int = Field(60, gt=0)

    def _identity(self) -> dict:
        members = [self.member(m).fingerprint() for m in self.members]
        return dict(retriever=self.retriever, level=self.level, k=self.k, members=members)

    def _fuse(self, runs: list[pd.DataFrame]) -> pd.DataFrame:
        return fusion.rrf(runs, k=self.k, level=self.level)


class WeightedSystem(_Fusion):
    retriever: Literal["weighted"]
    # name -> weight; iterating gives the names, as for rrf.
    members: dict[str, Annotated[float, Field(gt=0)]] = Field(min_length=2)

    def _identity(self) -> dict:
        members = [[self.member(m).fingerprint(), w] for m, w in self.members.items()]
        return dict(retriever=self.retriever, level=self.level, members=members)

    def _fuse(self, runs: list[pd.DataFrame]) -> pd.DataFrame:
        return fusion.weighted(runs, list(self.members.values()), level=self.level)


class RerankSystem(_System):
    """Re-scores the top `depth` candidates of another system (see core.retrieval.rerank)."""

    reads_corpus: ClassVar[bool] = True
    retriever: Literal["rerank"]
    candidates: str
    depth: int = Field(100, gt=0)
    threshold: float | None = None
    model: str = Field(rerank.BI_ENCODER, description="bi-encoder, or a cross-encoder folder")
    batch_size: int = Field(32, gt=0)

    @property
    def member_names(self) -> list[str]:
        return [self.candidates]

    def _identity(self) -> dict:
        identity = self.model_dump(mode="json", exclude={"batch_size", "candidates"})
        return identity | {"candidates": self.member(self.candidates).fingerprint()}

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        return self.member(self.candidates).chunk_level(reference)

    def run_chunking(self, reference: ChunkingConfig | None) -> ChunkingConfig | None:
        return self.member(self.candidates).run_chunking(reference)

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        below = self.member(self.candidates).recorded_config(reference)
        return self.model_dump(mode="json", exclude={"batch_size"}) | {"candidates": below}

    def _chunkings(self, system: _System, reference: ChunkingConfig | None) -> list:
        if system.indexed:
            return [system.run_chunking(reference)]
        return [
            c for m in system.member_names for c in self._chunkings(system.member(m), reference)
        ]

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        if inputs.corpus is None or self.candidates not in inputs.member_runs:
            raise ValueError("a rerank run needs the corpus and its candidates' run")
        chunkings = self._chunkings(self.member(self.candidates), inputs.reference)
        texts = rerank.passages(inputs.corpus, [inputs.chunked(c) for c in chunkings])
        if self.model == rerank.BI_ENCODER:
            cache = inputs.embeddings_dir or inputs.index_dir / "embeddings"
            scorer = rerank.BiEncoderScorer(texts, cache, batch_size=self.batch_size)
        else:
            folder = (
                Path(self.model) if Path(self.model).is_absolute() else inputs.base_dir / self.model
            )
            scorer = rerank.CrossEncoderScorer(texts, folder, batch_size=self.batch_size)
        return rerank.rerank(
            inputs.member_runs[self.candidates],
            inputs.queries,
            scorer,
            depth=self.depth,
            threshold=self.threshold,
            k=inputs.top_k,
        )
