"""Named system configurations (retriever + chunking + parameters) and what runs them.

`load_systems` reads `systems: {name: {...}}` from YAML into a discriminated union on
`retriever`. Each system has a `fingerprint()`: 16 hex chars of the SHA-256 of the canonical
JSON of everything that changes its results, so stored runs can be reused exactly when nothing
that matters changed (see docs/systems.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import pandas as pd
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)

from rageval_pipeline.core.bounds import confined
from rageval_pipeline.core.chunking import ChunkingConfig
from rageval_pipeline.core.config import load_model, rule
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval import bm25, dense, fusion, rerank
from rageval_pipeline.core.retrieval.base import Retriever, execute
from rageval_pipeline.core.retrieval.encoders import Backend
from rageval_pipeline.core.retrieval.external import (
    HttpRetriever,
    PythonRetriever,
    read_run_file,
)

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
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
    embeddings_dir: Path | None = None  # the embedding cache (dense re-scoring)


class _System(BaseModel, ABC):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # False when the answers come from outside (a live service): a run is never reused then.
    reusable: ClassVar[bool] = True
    reads_corpus: ClassVar[bool] = False  # True when producing a run reads the documents' text
    _name: str | None = PrivateAttr(None)
    # The configurations of `member_names` by name, set by `load_systems` once all are known.
    _members: dict[str, SystemConfig] = PrivateAttr(default_factory=dict)

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

    def member(self, name: str) -> SystemConfig:
        if name not in self._members:
            raise ValueError(f"member {name!r} is not resolved; load systems with load_systems")
        return self._members[name]

    @property
    def indexed(self) -> bool:
        """Whether it chunks the corpus and builds an index before it can run."""
        return False

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        """Chunk-level judgments apply only when every chunking behind the run is the suite's
        reference chunking (see core.results)."""
        return False

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        """The configuration stored with a run."""
        return self.model_dump(mode="json")

    @abstractmethod
    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        """The RUN table of this system on `inputs.queries`."""


class _Indexed(_System):
    """A system over the chunked corpus (its `chunking` field): chunk, build an index, search."""

    index_version: ClassVar[str]  # the index format's version: part of the index's code version

    @property
    def indexed(self) -> bool:
        return True

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        return reference is not None and self.chunking.resolve(reference) == reference

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        config = self.model_dump(mode="json")
        config["chunking"] = self.chunking.resolve(reference).model_dump(mode="json")
        return config

    @abstractmethod
    def build_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        """Build the index over `chunks` (already chunked with `self.chunking`) and save it
        atomically to `directory`; return metadata for the Dagster layer. A long build reports
        its progress through `log`."""

    @abstractmethod
    def open_index(self, directory: Path) -> Retriever:
        """The saved index, ready to search."""

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        return execute(self.open_index(inputs.index_dir).search, inputs.queries, inputs.top_k)


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

    def _identity(self) -> dict:
        # Batch size changes speed, not vectors (and cached vectors are reused whatever it is).
        # The default backend stays out, so fingerprints from before backends existed hold.
        exclude = {"batch_size"} | ({"backend"} if self.backend == "torch" else set())
        return self.model_dump(mode="json", exclude=exclude)

    def build_index(
        self, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path, log: Log | None = None
    ) -> dict:
        start = time.perf_counter()
        index = dense.DenseIndex.build(
            chunks,
            embeddings_dir,
            model_name=self.model,
            batch_size=self.batch_size,
            max_seq_length=self.max_seq_length,
            backend=self.backend,
            progress=None if log is None else lambda p: log(f"{self.name or 'dense'}: {p}"),
        )
        index.save(directory)
        return {**index.stats.as_metadata(), "seconds": round(time.perf_counter() - start, 3)}

    def open_index(self, directory: Path) -> Retriever:
        return dense.DenseIndex.load(directory)


class _Fusion(_System):
    level: fusion.Level = "chunk"

    @property
    def member_names(self) -> list[str]:
        return list(self.members)

    def chunk_level(self, reference: ChunkingConfig | None) -> bool:
        return all(self.member(m).chunk_level(reference) for m in self.members)

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


class RunFileSystem(_System):
    retriever: Literal["run_file"]
    path: str = Field(min_length=1, description="relative to the systems file's folder")
    format: Literal["auto", "trec", "parquet"] = "auto"
    _base_dir: Path = PrivateAttr(default_factory=Path)

    def resolved_path(self, base_dir: Path | None = None) -> Path:
        """The run file, which must be a regular file inside the systems file's folder."""
        folder = base_dir or self._base_dir
        try:
            return confined(folder, self.path)
        except ValueError as exc:
            raise InputError(folder, str(exc), field="path") from None

    def _identity(self) -> dict:
        # The file's content decides the results; where it lives does not.
        digest = hashlib.sha256(self.resolved_path().read_bytes()).hexdigest()
        return dict(retriever=self.retriever, format=self.format, sha256=digest)

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        """The run file's rows for the judged queries (a relative path is taken from
        `inputs.base_dir`, as the fingerprint does)."""
        run = read_run_file(self.resolved_path(inputs.base_dir), self.format)
        return run[run["query_id"].isin(inputs.queries["query_id"])]


class _Service(_System):
    """A live search service, asked query by query: its answers are never reused."""

    reusable: ClassVar[bool] = False

    @abstractmethod
    def open(self, base_dir: Path) -> Retriever:
        """A retriever for the service; `base_dir` is the systems file's folder."""

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        retriever = self.open(inputs.base_dir)
        return execute(retriever.search, inputs.queries, inputs.top_k, concurrency=self.concurrency)


class HttpSystem(_Service):
    retriever: Literal["http"]
    url: str = Field(pattern=r"^https?://\S+$")
    timeout_s: float = Field(30.0, gt=0)
    concurrency: int = Field(4, ge=1)
    retries: int = Field(3, ge=1, description="attempts in all, the first included")
    headers_from_env: dict[str, str] = Field(default_factory=dict)

    def _identity(self) -> dict:
        # Timeouts, concurrency, retries and credentials change how, not what, it answers.
        return dict(retriever=self.retriever, url=self.url)

    def open(self, base_dir: Path) -> Retriever:
        """Headers are read from the environment here only."""
        headers = {}
        for header, variable in self.headers_from_env.items():
            if variable not in os.environ:
                raise InputError(
                    None,
                    f"environment variable {variable} is not set",
                    field=f"headers_from_env.{header}",
                )
            headers[header] = os.environ[variable]
        return HttpRetriever(
            self.url, timeout_s=self.timeout_s, attempts=self.retries, headers=headers
        )


class PythonSystem(_Service):
    retriever: Literal["python"]
    entry_point: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    timeout_s: float = Field(30.0, gt=0)
    concurrency: int = Field(4, ge=1)
    retries: int = Field(3, ge=1, description="attempts in all, the first included")

    def _identity(self) -> dict:
        return dict(retriever=self.retriever, entry_point=self.entry_point)

    def open(self, base_dir: Path) -> Retriever:
        """The entry point's module is looked for first in `base_dir`."""
        return PythonRetriever(
            self.entry_point, timeout_s=self.timeout_s, attempts=self.retries, search_path=base_dir
        )


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

    def recorded_config(self, reference: ChunkingConfig | None) -> dict:
        below = self.member(self.candidates).recorded_config(reference)
        return self.model_dump(mode="json", exclude={"batch_size"}) | {"candidates": below}

    def _chunkings(self, system: SystemConfig, reference: ChunkingConfig | None) -> list:
        if system.indexed:
            return [system.chunking.resolve(reference)]
        return [
            c for m in system.member_names for c in self._chunkings(system.member(m), reference)
        ]

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        if inputs.corpus is None or self.candidates not in inputs.member_runs:
            raise ValueError("a rerank run needs the corpus and its candidates' run")
        chunkings = self._chunkings(self.member(self.candidates), inputs.reference)
        texts = rerank.passages(inputs.corpus, chunkings)
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


SystemConfig = Annotated[
    BM25System
    | DenseSystem
    | RRFSystem
    | WeightedSystem
    | RunFileSystem
    | HttpSystem
    | PythonSystem
    | RerankSystem,
    Field(discriminator="retriever"),
]


# --- loading -----------------------------------------------------------------------------


def _system_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError("a system name is letters, digits, '_', '.' or '-'")
    return name


class SystemsFile(BaseModel):
    """systems.yaml: `systems: {name: {...}}`; names are set and fusion members resolved here."""

    model_config = ConfigDict(extra="forbid")
    systems: dict[Annotated[str, AfterValidator(_system_name)], SystemConfig]

    @model_validator(mode="after")
    def _wire(self, info: ValidationInfo) -> SystemsFile:
        base_dir = (info.context or {}).get("base_dir", Path())
        for name, system in self.systems.items():
            system._name = name
            if isinstance(system, RunFileSystem):
                try:
                    confined(base_dir, system.path, exists=False)
                except ValueError as exc:
                    raise rule(("systems", name, "path"), str(exc)) from None
                system._base_dir = base_dir
        for name in self.systems:
            self._resolve(name, ())
        return self

    def _resolve(self, name: str, chain: tuple[str, ...]) -> None:
        system = self.systems[name]
        if not system.member_names:
            return
        if name in chain:
            cycle = " -> ".join([*chain, name])
            raise rule(("systems", name, "members"), f"fusion cycle: {cycle}")
        for i, member in enumerate(system.member_names):
            where = ("members", i if isinstance(system, RRFSystem) else member)
            if isinstance(system, RerankSystem):
                where = ("candidates",)
            if member not in self.systems:
                raise rule(("systems", name, *where), f"unknown system {member!r}")
            self._resolve(member, (*chain, name))
            system._members[member] = self.systems[member]


def load_systems(path: Path) -> dict[str, SystemConfig]:
    """Every system of a YAML file `systems: {name: {...}}`, fusion members resolved."""
    return load_model(Path(path), SystemsFile, context={"base_dir": Path(path).parent}).systems
