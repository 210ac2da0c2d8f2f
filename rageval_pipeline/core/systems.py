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
from rageval_pipeline.core.retrieval import fusion
from rageval_pipeline.core.retrieval.base import Retriever
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.dense import DEFAULT_MODEL, DenseIndex
from rageval_pipeline.core.retrieval.external import (
    HttpRetriever,
    PythonRetriever,
    read_run_file,
)

Kind = Literal["index", "fusion", "external"]
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class _System(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[Kind]
    _name: str | None = PrivateAttr(None)

    @property
    def name(self) -> str | None:
        """The name it has in its systems file (set by `load_systems`; not in the fingerprint)."""
        return self._name

    @property
    def needs_index(self) -> bool:
        return self.kind == "index"

    @property
    def is_fusion(self) -> bool:
        return self.kind == "fusion"

    @property
    def is_external(self) -> bool:
        return self.kind == "external"

    def fingerprint(self) -> str:
        canonical = json.dumps(self._identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def _identity(self) -> dict:
        """What changes results; by default every field."""
        return self.model_dump(mode="json")


class BM25System(_System):
    kind: ClassVar[Kind] = "index"
    retriever: Literal["bm25"]
    chunking: ChunkingConfig = ChunkingConfig()
    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)


class DenseSystem(_System):
    kind: ClassVar[Kind] = "index"
    retriever: Literal["dense"]
    chunking: ChunkingConfig = ChunkingConfig()
    model: str = DEFAULT_MODEL
    batch_size: int = Field(32, gt=0)
    max_seq_length: int = Field(256, gt=0)

    def _identity(self) -> dict:
        # Batch size changes speed, not vectors (and cached vectors are reused whatever it is).
        return self.model_dump(mode="json", exclude={"batch_size"})


class _Fusion(_System):
    kind: ClassVar[Kind] = "fusion"
    level: fusion.Level = "chunk"
    # Member configurations by name, set by `load_systems` once every name is known.
    _members: dict[str, SystemConfig] = PrivateAttr(default_factory=dict)

    def member(self, name: str) -> SystemConfig:
        if name not in self._members:
            raise ValueError(f"member {name!r} is not resolved; load systems with load_systems")
        return self._members[name]


class RRFSystem(_Fusion):
    retriever: Literal["rrf"]
    members: list[str] = Field(min_length=2)
    k: int = Field(60, gt=0)

    def _identity(self) -> dict:
        members = [self.member(m).fingerprint() for m in self.members]
        return dict(retriever=self.retriever, level=self.level, k=self.k, members=members)


class WeightedSystem(_Fusion):
    retriever: Literal["weighted"]
    # name -> weight; iterating gives the names, as for rrf.
    members: dict[str, Annotated[float, Field(gt=0)]] = Field(min_length=2)

    def _identity(self) -> dict:
        members = [[self.member(m).fingerprint(), w] for m, w in self.members.items()]
        return dict(retriever=self.retriever, level=self.level, members=members)


class RunFileSystem(_System):
    kind: ClassVar[Kind] = "external"
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


class HttpSystem(_System):
    kind: ClassVar[Kind] = "external"
    retriever: Literal["http"]
    url: str = Field(pattern=r"^https?://\S+$")
    timeout_s: float = Field(30.0, gt=0)
    concurrency: int = Field(4, ge=1)
    retries: int = Field(3, ge=1, description="attempts in all, the first included")
    headers_from_env: dict[str, str] = Field(default_factory=dict)

    def _identity(self) -> dict:
        # Timeouts, concurrency, retries and credentials change how, not what, it answers.
        return dict(retriever=self.retriever, url=self.url)


class PythonSystem(_System):
    kind: ClassVar[Kind] = "external"
    retriever: Literal["python"]
    entry_point: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    timeout_s: float = Field(30.0, gt=0)
    concurrency: int = Field(4, ge=1)
    retries: int = Field(3, ge=1, description="attempts in all, the first included")

    def _identity(self) -> dict:
        return dict(retriever=self.retriever, entry_point=self.entry_point)


SystemConfig = Annotated[
    BM25System
    | DenseSystem
    | RRFSystem
    | WeightedSystem
    | RunFileSystem
    | HttpSystem
    | PythonSystem,
    Field(discriminator="retriever"),
]
_FUSION_TYPES = (RRFSystem, WeightedSystem)


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
        if not isinstance(system, _FUSION_TYPES):
            return
        if name in chain:
            cycle = " -> ".join([*chain, name])
            raise rule(("systems", name, "members"), f"fusion cycle: {cycle}")
        for i, member in enumerate(system.members):
            where = i if isinstance(system, RRFSystem) else member
            if member not in self.systems:
                raise rule(("systems", name, "members", where), f"unknown system {member!r}")
            self._resolve(member, (*chain, name))
            system._members[member] = self.systems[member]


def load_systems(path: Path) -> dict[str, SystemConfig]:
    """Every system of a YAML file `systems: {name: {...}}`, fusion members resolved."""
    return load_model(Path(path), SystemsFile, context={"base_dir": Path(path).parent}).systems


# --- running -----------------------------------------------------------------------------


def build_index(
    system: SystemConfig, chunks: pd.DataFrame, directory: Path, *, embeddings_dir: Path
) -> dict:
    """Build and save the index of a bm25/dense system over `chunks` (already chunked with
    `system.chunking`); return metadata for the Dagster layer."""
    start = time.perf_counter()
    if isinstance(system, BM25System):
        BM25Index.build(chunks, k1=system.k1, b=system.b).save(directory)
        seconds = time.perf_counter() - start
        return dict(
            n_chunks=len(chunks),
            seconds=round(seconds, 3),
            docs_per_s=round(len(chunks) / seconds, 1) if seconds else 0.0,
        )
    if isinstance(system, DenseSystem):
        index = DenseIndex.build(
            chunks,
            embeddings_dir,
            model_name=system.model,
            batch_size=system.batch_size,
            max_seq_length=system.max_seq_length,
        )
        index.save(directory)
        return {**index.stats.as_metadata(), "seconds": round(time.perf_counter() - start, 3)}
    raise ValueError(f"{system.retriever} systems have no index")


def open_retriever(system: SystemConfig, directory: Path) -> Retriever:
    """The saved index of a bm25/dense system, ready to search."""
    if isinstance(system, BM25System):
        return BM25Index.load(directory)
    if isinstance(system, DenseSystem):
        return DenseIndex.load(directory)
    raise ValueError(f"{system.retriever} systems have no index")


def open_external(system: SystemConfig, *, base_dir: Path) -> Retriever:
    """A retriever for an http/python system; run it with `execute(..., concurrency=
    system.concurrency)`. `base_dir` (the systems file's folder) is where a Python entry
    point's module is looked for first. Headers are read from the environment here only."""
    if isinstance(system, HttpSystem):
        headers = {}
        for header, variable in system.headers_from_env.items():
            if variable not in os.environ:
                raise InputError(
                    None,
                    f"environment variable {variable} is not set",
                    field=f"headers_from_env.{header}",
                )
            headers[header] = os.environ[variable]
        return HttpRetriever(
            system.url, timeout_s=system.timeout_s, attempts=system.retries, headers=headers
        )
    if isinstance(system, PythonSystem):
        return PythonRetriever(
            system.entry_point,
            timeout_s=system.timeout_s,
            attempts=system.retries,
            search_path=base_dir,
        )
    raise ValueError(f"{system.retriever} systems are not interactive")


def run_external_file(system: SystemConfig, base_dir: Path) -> pd.DataFrame:
    """The RUN table of a run_file system; a relative path is taken from `base_dir`, the
    systems file's folder (as its fingerprint does)."""
    if not isinstance(system, RunFileSystem):
        raise ValueError(f"{system.retriever} systems have no run file")
    return read_run_file(system.resolved_path(base_dir), system.format)


def fuse(system: SystemConfig, member_runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The fused RUN table of an rrf/weighted system from its members' runs, keyed by name."""
    if not isinstance(system, _FUSION_TYPES):
        raise ValueError(f"{system.retriever} systems are not fusions")
    missing = [m for m in system.members if m not in member_runs]
    if missing:
        raise ValueError(f"no run for member(s) {missing}")
    runs = [member_runs[m] for m in system.members]
    if isinstance(system, RRFSystem):
        return fusion.rrf(runs, k=system.k, level=system.level)
    return fusion.weighted(runs, list(system.members.values()), level=system.level)
