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
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError

from rageval_pipeline.core.chunking import ChunkingConfig
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval import fusion
from rageval_pipeline.core.retrieval.base import Retriever
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from rageval_pipeline.core.retrieval.dense import DEFAULT_MODEL, DenseIndex
from rageval_pipeline.core.retrieval.external import (
    HttpRetriever,
    PythonRetriever,
    field_path,
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
        return (base_dir or self._base_dir) / self.path

    def _identity(self) -> dict:
        # The file's content decides the results; where it lives does not.
        path = self.resolved_path()
        if not path.is_file():
            raise InputError(path, "run file not found", field="path")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
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
