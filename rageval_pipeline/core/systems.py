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
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError

from rageval_pipeline.core.chunking import ChunkingConfig
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval import bm25, dense, fusion
from rageval_pipeline.core.retrieval.base import Retriever, execute
from rageval_pipeline.core.retrieval.external import (
    HttpRetriever,
    PythonRetriever,
    field_path,
    read_run_file,
)

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_Log = Callable[[str], None]


@dataclass(frozen=True)
class RunInputs:
    """What producing a run may need; each system kind reads its own part."""

    queries: pd.DataFrame  # the judged queries: query_id, text
    top_k: int
    index_dir: Path  # where an indexed system's index lives
    base_dir: Path  # the systems file's folder (run files, entry point modules)
    member_runs: Mapping[str, pd.DataFrame] = field(default_factory=dict)


class _System(BaseModel, ABC):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # False when the answers come from outside (a live service): a run is never reused then.
    reusable: ClassVar[bool] = True
    _name: str | None = PrivateAttr(None)

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
        """The systems whose runs this one reads (fusion members)."""
        return []

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
        self,
        chunks: pd.DataFrame,
        directory: Path,
        *,
        embeddings_dir: Path,
        log: _Log | None = None,
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
        self,
        chunks: pd.DataFrame,
        directory: Path,
        *,
        embeddings_dir: Path,
        log: _Log | None = None,
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

    def _identity(self) -> dict:
        # Batch size changes speed, not vectors (and cached vectors are reused whatever it is).
        return self.model_dump(mode="json", exclude={"batch_size"})

    def build_index(
        self,
        chunks: pd.DataFrame,
        directory: Path,
        *,
        embeddings_dir: Path,
        log: _Log | None = None,
    ) -> dict:
        start = time.perf_counter()
        index = dense.DenseIndex.build(
            chunks,
            embeddings_dir,
            model_name=self.model,
            batch_size=self.batch_size,
            max_seq_length=self.max_seq_length,
            progress=None if log is None else lambda p: log(f"{self.name or 'dense'}: {p}"),
        )
        index.save(directory)
        return {**index.stats.as_metadata(), "seconds": round(time.perf_counter() - start, 3)}

    def open_index(self, directory: Path) -> Retriever:
        return dense.DenseIndex.load(directory)


class _Fusion(_System):
    level: fusion.Level = "chunk"
    # Member configurations by name, set by `load_systems` once every name is known.
    _members: dict[str, SystemConfig] = PrivateAttr(default_factory=dict)

    def member(self, name: str) -> SystemConfig:
        if name not in self._members:
            raise ValueError(f"member {name!r} is not resolved; load systems with load_systems")
        return self._members[name]

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
        return (base_dir or self._base_dir) / self.path

    def _identity(self) -> dict:
        # The file's content decides the results; where it lives does not.
        path = self.resolved_path()
        if not path.is_file():
            raise InputError(path, "run file not found", field="path")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
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
_ADAPTER: TypeAdapter[SystemConfig] = TypeAdapter(SystemConfig)
_FUSION_TYPES = (RRFSystem, WeightedSystem)


# --- loading -----------------------------------------------------------------------------


def load_systems(path: Path) -> dict[str, SystemConfig]:
    """Every system of a YAML file `systems: {name: {...}}`, fusion members resolved."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(
            path, f"not valid YAML: {getattr(exc, 'problem', exc)}", line=line
        ) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("systems"), dict):
        raise InputError(path, "expected a mapping with a 'systems' mapping", field="systems")
    if extra := sorted(set(raw) - {"systems"}):
        raise InputError(path, f"unknown top-level key(s) {extra}", field=extra[0])
    systems: dict[str, SystemConfig] = {}
    for name, body in raw["systems"].items():
        where = f"systems.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(path, "a system name is letters, digits, '_', '.' or '-'", field=where)
        try:
            system = _ADAPTER.validate_python(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = list(first["loc"])
            # A discriminated union puts the tag first: `systems.x.bm25.k1` reads as `systems.x.k1`.
            if loc and isinstance(body, dict) and loc[0] == body.get("retriever"):
                loc = loc[1:]
            raise InputError(path, first["msg"], field=field_path([where, *loc])) from None
        if isinstance(system, RunFileSystem):
            system._base_dir = path.parent
        system._name = name
        systems[name] = system
    for name, system in systems.items():
        if isinstance(system, _FUSION_TYPES):
            _resolve(path, name, systems, ())
    return systems


def _resolve(path: Path, name: str, systems: dict[str, SystemConfig], chain: tuple) -> None:
    system = systems[name]
    if not isinstance(system, _FUSION_TYPES):
        return
    if name in chain:
        cycle = " -> ".join([*chain, name])
        raise InputError(path, f"fusion cycle: {cycle}", field=f"systems.{name}.members")
    for i, member in enumerate(system.members):
        where = f"[{i}]" if isinstance(system, RRFSystem) else f".{member}"
        field = f"systems.{name}.members{where}"
        if member not in systems:
            raise InputError(path, f"unknown system {member!r}", field=field)
        _resolve(path, member, systems, (*chain, name))
        system._members[member] = systems[member]
