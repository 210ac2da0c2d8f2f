"""Indexed systems (bm25, dense): chunk the corpus, build an index, search it."""

from __future__ import annotations

import time
from abc import abstractmethod
from pathlib import Path
from typing import ClassVar, Literal

import pandas as pd
from pydantic import Field

from rageval_pipeline.core.retrieval import bm25, dense
from rageval_pipeline.core.retrieval.base import Retriever, execute
from rageval_pipeline.core.retrieval.embedding_cost import Recorded
from rageval_pipeline.core.retrieval.embeddings import Calibration
from rageval_pipeline.core.retrieval.encoders import Backend, Device
from rageval_pipeline.core.retrieval.shards import MAX_SHARDS, Shard, members, split
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.systems.base import Log, RunInputs, _System

# Chunks embedded to time a dense configuration beside a changed one: one batch, whatever the
# corpus (embedding techdocs' 200 chunks again took as long as the new configuration's; the
# whole of nfcorpus, minutes). Every judged query is still timed through it, so the latency
# check keeps its counts (p95 blocks from 20 queries, p99 from 100: core.gate.latency).
TIMING_SAMPLE = 32


class _Indexed(_System):
    """A system over the chunked corpus (its `chunking` field): chunk, build an index, search."""

    index_version: ClassVar[str]  # the index format's version: part of the index's code version

    @property
    def indexed(self) -> bool:
        return True

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        return reference is not None and self.run_chunking(reference) == reference

    def run_chunking(self, reference: ChunkingConfig | None) -> ChunkingConfig:
        """Its `chunking`, resolved against the suite's reference: the one place it is."""
        return self.chunking.resolve(reference)

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        config = self.model_dump(mode="json")
        config["chunking"] = self.run_chunking(reference).model_dump(mode="json")
        return config

    @abstractmethod
    def build_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        """Build the index over `chunks` (already chunked with `self.chunking`) and save it
        atomically to `directory`; return metadata for the Dagster layer. A long build reports
        its progress through `log`."""

    def build_timing_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        """An index of `chunks` whose searches take as long as `build_index`'s, its hits never
        read: the baseline's configuration timed beside a changed system (docs/gate.md). The
        whole index where building it costs no more than timing it (BM25 embeds nothing)."""
        return self.build_index(chunks, directory, embeddings_dir=embeddings_dir, log=log)

    @abstractmethod
    def open_index(self, directory: Path) -> Retriever:
        """The saved index, ready to search."""

    def to_embed(
        self, chunks: pd.DataFrame, embeddings_dir: Path
    ) -> tuple[dict[str, str], Recorded | None]:
        """The texts building the index would run through a model (cache misses, by keys
        naming the model) and the cost the model's last embedding here recorded (None: none
        yet): what the build costs before it starts (nothing for a lexical index)."""
        return {}, None

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        baseline = None if inputs.baseline is None else inputs.baseline.search
        search = self.open_index(inputs.index_dir).search
        return execute(search, inputs.queries, inputs.top_k, baseline=baseline)


class BM25System(_Indexed):
    index_version: ClassVar[str] = bm25.FORMAT_VERSION
    retriever: Literal["bm25"]
    chunking: ChunkingConfig = ChunkingConfig()
    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)

    def build_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        start = time.perf_counter()
        bm25.BM25Index.build(chunks, k1=self.k1, b=self.b).save(directory)
        seconds = time.perf_counter() - start
        return dict(
            n_chunks=len(chunks),
            seconds=round(seconds, 3),
            docs_per_s=round(len(chunks) / seconds, 1) if seconds else 0.0,
        )

    def open_index(self, directory: Path) -> Retriever:
        return bm25.BM25Index.load(directory)


class DenseSystem(_Indexed):
    index_version: ClassVar[str] = dense.FORMAT_VERSION
    retriever: Literal["dense"]
    chunking: ChunkingConfig = ChunkingConfig()
    model: str = dense.DEFAULT_MODEL
    batch_size: int = Field(32, gt=0)
    max_seq_length: int = Field(256, gt=0)
    # onnx-int8: int8 ONNX Runtime, faster on CPU at nDCG@10 within 0.003 (bench/README.md).
    backend: Backend = "torch"
    # auto: CUDA when torch (or onnxruntime, for onnx-int8) sees it, else CPU.
    device: Device = "cpu"
    # How many content-addressed shards the Dagster layer embeds as separate steps (in
    # parallel on a parallel executor); the vectors are the same whatever it is.
    shards: int = Field(1, ge=1, le=MAX_SHARDS)

    def _identity(self) -> dict:
        # Batch size and shards change speed, not vectors: a text is embedded in batches of
        # its own length, whatever else is embedded (core.retrieval.embeddings).
        # The device changes speed and the vectors' last float bits only (docs/systems.md),
        # and `auto` means different devices on different machines: it stays out too.
        # The default backend stays out, so fingerprints from before backends existed hold.
        exclude = {"batch_size", "device", "shards"} | (
            {"backend"} if self.backend == "torch" else set()
        )
        return self.model_dump(mode="json", exclude=exclude)

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        # The default device and shard count stay out, so configurations recorded before they
        # existed (committed baselines) show no `device: (unset) -> cpu` change.
        config = super().recorded_config(reference)
        if self.device == "cpu":
            del config["device"]
        if self.shards == 1:
            del config["shards"]
        return config

    def _encoding(self, log: Log | None, label: str) -> dict:
        """`dense.embed_passages`'s options for this system, progress lines prefixed `label`."""
        return dict(
            model_name=self.model,
            batch_size=self.batch_size,
            max_seq_length=self.max_seq_length,
            backend=self.backend,
            device=self.device,
            progress=None if log is None else lambda p: log(f"{label}: {p}"),
        )

    def split(self, chunks: pd.DataFrame) -> list[Shard]:
        """`chunks` in `shards` content-addressed shards (core.retrieval.shards)."""
        return split(chunks, self.shards)

    def embed_shard(
        self, chunks: pd.DataFrame, shard: Shard, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        """Embed `shard`'s texts into the cache under `embeddings_dir` (the index built after
        every shard reads them from there); metadata for the Dagster layer."""
        label = f"{self.name or 'dense'} {shard.label}"
        _, stats = dense.embed_passages(
            members(chunks, shard), embeddings_dir, **self._encoding(log, label)
        )
        return {"shard": shard.number, "shard_id": shard.id, **stats.as_metadata()}

    def build_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        start = time.perf_counter()
        encoding = self._encoding(log, self.name or "dense")
        index = dense.DenseIndex.build(chunks, embeddings_dir, **encoding)
        index.save(directory)
        return {**index.stats.as_metadata(), "seconds": round(time.perf_counter() - start, 3)}

    def build_timing_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        """TIMING_SAMPLE chunks embedded, not the corpus (`DenseIndex.build_for_timing`)."""
        start = time.perf_counter()
        encoding = self._encoding(log, self.name or "dense")
        index = dense.DenseIndex.build_for_timing(chunks, embeddings_dir, TIMING_SAMPLE, **encoding)
        index.save(directory)
        return {**index.stats.as_metadata(), "seconds": round(time.perf_counter() - start, 3)}

    def open_index(self, directory: Path) -> Retriever:
        return dense.DenseIndex.load(directory)

    def to_embed(
        self, chunks: pd.DataFrame, embeddings_dir: Path
    ) -> tuple[dict[str, str], Recorded | None]:
        encoding = self._encoding(None, "")
        del encoding["batch_size"], encoding["progress"]
        return dense.uncached(chunks, embeddings_dir, **encoding)

    def calibrate(self, texts: list[str], embeddings_dir: Path) -> tuple[Calibration, float]:
        """Load the model and time a sample of `texts` (`dense.calibrate_passages`)."""
        encoding = self._encoding(None, "")
        del encoding["progress"]
        return dense.calibrate_passages(texts, embeddings_dir, **encoding)
