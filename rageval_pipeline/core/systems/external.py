"""Systems whose results come from outside: a run file or a live service (http, python)."""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from pathlib import Path
from typing import ClassVar, Literal

import pandas as pd
from pydantic import Field, PrivateAttr

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.bounds import confined, open_regular
from rageval_pipeline.core.io.chunk_ids import is_chunk_id
from rageval_pipeline.core.retrieval.base import Retriever, execute
from rageval_pipeline.core.retrieval.external import (
    HttpRetriever,
    PythonRetriever,
    read_run_file,
)
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once
from rageval_pipeline.core.suites.passages import Locator
from rageval_pipeline.core.systems.base import RunInputs, _System


class _Outside(_System):
    """Results made outside the pipeline: the team's own retriever and chunker."""

    def returns_suite_chunks(
        self, run: pd.DataFrame, reference: ChunkingConfig | None, corpus: pd.DataFrame
    ) -> bool:
        """Every retrieved id is a chunk of the suite's reference chunking (`doc:chunk:n`)."""
        ids = run["doc_id"].dropna().astype(str)
        if reference is None or ids.empty or not is_chunk_id(ids).all():
            return False
        return bool(ids.isin(chunk_once(corpus, reference)["chunk_id"]).all())


class RunFileSystem(_Outside):
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
        path = self.resolved_path()
        try:
            with open_regular(path) as (handle, _):  # streamed: a run may be large
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
        except ValueError as exc:
            raise InputError(path, str(exc)) from None
        return dict(retriever=self.retriever, format=self.format, sha256=digest)

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        """The run file's rows for the judged queries (a relative path is taken from
        `inputs.base_dir`, as the fingerprint does)."""
        run = read_run_file(self.resolved_path(inputs.base_dir), self.format)
        return run[run["query_id"].isin(inputs.queries["query_id"])]


class _Service(_Outside):
    """A live search service, asked query by query: its answers are never reused."""

    reusable: ClassVar[bool] = False
    reads_corpus: ClassVar[bool] = True  # passages returned as text are located in it

    timeout_s: float = Field(30.0, gt=0)
    concurrency: int = Field(4, ge=1)
    retries: int = Field(3, ge=1, description="attempts in all, the first included")

    @abstractmethod
    def open(self, base_dir: Path, locator: Locator | None = None) -> Retriever:
        """A retriever for the service; `base_dir` is the systems file's folder, `locator`
        finds passages it returns as text (`core.suites.passages`)."""

    def produce_run(self, inputs: RunInputs) -> pd.DataFrame:
        corpus = inputs.corpus
        retriever = self.open(inputs.base_dir, None if corpus is None else Locator(corpus))
        return execute(retriever.search, inputs.queries, inputs.top_k, concurrency=self.concurrency)


class HttpSystem(_Service):
    retriever: Literal["http"]
    url: str = Field(pattern=r"^https?://\S+$")
    headers_from_env: dict[str, str] = Field(default_factory=dict)

    def _identity(self) -> dict:
        # Timeouts, concurrency, retries and credentials change how, not what, it answers.
        return dict(retriever=self.retriever, url=self.url)

    def open(self, base_dir: Path, locator: Locator | None = None) -> Retriever:
        """Headers are read from the environment, and checked, by the retriever only: an
        invalid value is an error naming the header and the variable, never the value."""
        return HttpRetriever(
            self.url,
            timeout_s=self.timeout_s,
            attempts=self.retries,
            headers_from_env=self.headers_from_env,
            locator=locator,
        )


class PythonSystem(_Service):
    retriever: Literal["python"]
    entry_point: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

    def _identity(self) -> dict:
        return dict(retriever=self.retriever, entry_point=self.entry_point)

    def open(self, base_dir: Path, locator: Locator | None = None) -> Retriever:
        """The entry point's module is looked for first in `base_dir`."""
        return PythonRetriever(
            self.entry_point,
            timeout_s=self.timeout_s,
            attempts=self.retries,
            search_path=base_dir,
            locator=locator,
        )
