"""Golden suites: hand-judged queries over a small document set, in one JSON or YAML file.

`load_suite` parses and validates a suite and fails on the first problem with one line naming
the file, the field (`queries[12].intent`) and the rule (`core.suites.loaders.suite_tables` turns a
valid suite into the pipeline's tables). The format is described in docs/suite-format.md;
its JSON Schema is generated from these models (`core.suites.schema`).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.bounds import absent, confined, quote_json
from rageval_pipeline.core.io.config import parse, rule, validate
from rageval_pipeline.core.suites import stamps
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.suites.documents import Document
from rageval_pipeline.core.suites.evidence import (
    Move,
    Reference,
)
from rageval_pipeline.core.suites.fields import StrictModel
from rageval_pipeline.core.suites.matching import (
    MatchMode,
    TargetError,
    resolve_target,
)
from rageval_pipeline.core.suites.queries import Query

# 1.1: each span's grade is its own (a nugget's, by how much of the answer it carries), and a
# nugget may quote its decisive words; 1.0 spans carried their target's grade, and are read
# as nuggets graded so until re-judged (`rageval spans nuggets` bumps the version).
FORMAT_VERSIONS = ("1.0", "1.1")
FORMAT_VERSION = FORMAT_VERSIONS[-1]
SUITE_FILES = ("suite.json", "suite.yaml", "suite.yml")


class Distinct(StrictModel):
    """Two targets whose texts are near-duplicates (core.suites.consistency) but say different
    things ("set headers" and "set cookies" on templated pages): their grades may differ."""

    targets: tuple[str, str] = Field(description="two document or chunk ids")
    reason: str = Field(min_length=1, description="what tells them apart, for the next reader")


class Suite(StrictModel):
    """A golden suite, format 1.1 (or 1.0): documents, queries and graded judgments."""

    schema_: str | None = Field(
        None, alias="$schema", description="optional: path or URL of suite.schema.json, for editors"
    )
    version: Literal["1.0", "1.1"]
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="= the folder name")
    description: str
    created_at: datetime.date
    chunking: ChunkingConfig = Field(
        default_factory=ChunkingConfig,
        description="reference chunking: chunk targets are numbered under it",
    )
    match: MatchMode = "exact"
    documents: list[Document] = Field(min_length=1)
    queries: list[Query] = Field(
        default_factory=list, description="may be empty while the suite is being written"
    )
    distinct: list[Distinct] = Field(
        default_factory=list,
        description="near-duplicate target pairs that differ in what matters: graded freely",
    )

    _reference: Reference | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _name_is_folder(cls, value: str, info: ValidationInfo) -> str:
        folder = (info.context or {}).get("folder")
        if folder is not None and value != folder:
            raise ValueError(f"must equal the suite's folder name {folder!r}")
        return value

    @field_validator("chunking")
    @classmethod
    def _concrete_chunking(cls, value: ChunkingConfig) -> ChunkingConfig:
        if value.strategy == "reference":
            raise ValueError("a suite's chunking is the reference itself: name a concrete strategy")
        return value

    @model_validator(mode="after")
    def _references(self) -> Suite:
        for field, items in (("documents", self.documents), ("queries", self.queries)):
            first: dict[str, int] = {}
            for index, item in enumerate(items):
                if item.id in first:
                    raise rule(
                        (field, index, "id"),
                        f"duplicate id {item.id!r} (first at {field}[{first[item.id]}])",
                    )
                first[item.id] = index
        self._reference = Reference(
            {d.id: d.text for d in self.documents}, self.chunking, self.match
        )
        for index, query in enumerate(self.queries):
            query._resolve(self._reference, ("queries", index))
        if self.version == "1.0":
            for index, query in enumerate(self.queries):
                marked = next((n for n, s in enumerate(query.spans) if s.decisive), None)
                if marked is not None:
                    problem = "needs suite format 1.1 (`rageval spans nuggets` converts)"
                    raise rule(("queries", index, "spans", marked, "decisive"), problem)
        self._derive()
        for index, pair in enumerate(self.distinct):
            for side, target in enumerate(pair.targets):
                try:
                    resolve_target(target, self._reference.chunk_counts, self.match)
                except TargetError as error:
                    raise rule(("distinct", index, "targets", side), str(error)) from None
        return self

    def _derive(self) -> None:
        """Each span-judged query's reference chunks and their derived grades, all at once."""
        by_span = {q.id: q for q in self.queries if q.spans}
        named = {
            i: [
                (*eg, q.span_target(n), key)
                for n, (eg, key) in enumerate(zip(q.evidence, q.decisive, strict=True))
            ]
            for i, q in by_span.items()
        }
        for query_id, chunks in self.reference.derived(named).items():
            by_span[query_id]._derived = chunks

    @property
    def unjudged(self) -> list[Query]:
        """Queries without any judgment yet (file order)."""
        return [q for q in self.queries if not q.judged]

    @property
    def distinct_pairs(self) -> set[frozenset[str]]:
        """The `distinct` pairs, by resolved target id."""
        counts = self.reference.chunk_counts
        return {
            frozenset(resolve_target(t, counts, self.match)[0] for t in pair.targets)
            for pair in self.distinct
        }

    @property
    def reference(self) -> Reference:
        """The documents under the reference chunking: chunk extents, spans, re-anchoring."""
        assert self._reference is not None  # set by validation
        return self._reference

    @property
    def judgment_count(self) -> int:
        return sum(len(q.qrels) for q in self.queries)

    @property
    def moves(self) -> list[Move]:
        """Judged spans whose text moved, re-anchored where it is now (file order)."""
        return [move for query in self.queries for move in query._moves]


# Suites parsed in this process, by file: the stamps of the files read (`suite_files`), the
# suite. A step asked for one suite four or five times, parsing it each time.
_PARSED: dict[Path, tuple[list[stamps.Stamp], Suite]] = {}


def suite_files(file: Path, suite: Suite) -> list[Path]:
    """What parsing `suite` from `file` read: the file, then its documents' content files."""
    docs = [
        confined(file.parent, d.content_path) for d in suite.documents if d.content_path is not None
    ]
    return [file.resolve(), *(d.resolve() for d in docs)]


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file, or the suite.json / suite.yaml in a folder; parsed once
    per process while the file and its documents' content files keep their size and
    modification time. The suite returned is shared: read it, never change it."""
    file = resolve_suite_file(Path(path))
    key = file.resolve()
    if (cached := _PARSED.get(key)) is not None and stamps.hold(cached[0]):
        return cached[1]
    before = stamps.stamps([key])
    suite = _parse_suite(file)
    read = stamps.stamps(suite_files(key, suite))
    # Kept only when no file changed while it was read, and all are `settled`.
    if read and before and read[0] == before[0] and stamps.settled(read):
        _PARSED[key] = (read, suite)
    return suite


def _parse_suite(file: Path) -> Suite:
    document = parse(file)
    raw = document.data
    if not isinstance(raw, dict):
        raise document.error((), "the top level must be an object")
    if "version" not in raw:
        raise document.error(("version",), "field required")
    if raw["version"] not in FORMAT_VERSIONS:
        known = ", ".join(map(quote_json, FORMAT_VERSIONS))
        problem = f"unknown suite format version {quote_json(raw['version'])} (known: {known})"
        raise document.error(("version",), problem)
    context = {
        "base_dir": file.parent,
        "folder": file.parent.name if file.name in SUITE_FILES else None,
    }
    return validate(document, Suite, context)


def resolve_suite_file(path: Path) -> Path:
    """The suite file `path` names: itself, or a folder's one suite file."""
    if problem := absent(path):
        raise InputError(path, problem)
    if path.is_dir():
        found = [path / name for name in SUITE_FILES if (path / name).is_file()]
        if not found:
            raise InputError(
                path, f"no suite file in this folder (looked for {', '.join(SUITE_FILES)})"
            )
        if len(found) > 1:
            names = " and ".join(f.name for f in found)
            raise InputError(path, f"holds both {names}; keep one")
        try:  # a suite file that is a link out of its folder is not read
            return confined(path, found[0].name)
        except ValueError as exc:
            raise InputError(path, str(exc)) from None
    return path
