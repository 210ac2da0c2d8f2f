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
    Evidence,
    Move,
    Reference,
    Span,
    SpanJudgment,
    check_primary,
)
from rageval_pipeline.core.suites.fields import Grade, Id, StrictModel
from rageval_pipeline.core.suites.matching import (
    Level,
    MatchMode,
    TargetError,
    resolve_target,
    split_chunk_id,
)
from rageval_pipeline.core.suites.spans import QuoteError

# 1.1: each span's grade is its own (a nugget's, by how much of the answer it carries), and a
# nugget may quote its decisive words; 1.0 spans carried their target's grade, and are read
# as nuggets graded so until re-judged (`rageval spans nuggets` bumps the version).
FORMAT_VERSIONS = ("1.0", "1.1")
FORMAT_VERSION = FORMAT_VERSIONS[-1]
SUITE_FILES = ("suite.json", "suite.yaml", "suite.yml")


class Query(StrictModel):
    """A query and its graded judgments of documents or of chunks, or its evidence spans."""

    id: Id
    query: str = Field(description="may be empty only when query_type is edge")
    intent: str = Field(min_length=1, description="free label, e.g. factual, procedural")
    category: str | None = None
    difficulty: Literal["easy", "medium", "hard"] | None = None
    query_type: Literal["specific", "broad", "paraphrase", "edge"] = "specific"
    description: str | None = None
    judgments: dict[str, Grade] = Field(
        default_factory=dict,
        description="target (document id or chunk id, one level per query) -> grade 0..3",
    )
    spans: list[SpanJudgment] = Field(
        default_factory=list,
        description="graded evidence spans (instead of judgments): chunk level",
    )
    primary: str | None = Field(None, description="the judgments target with the highest grade")
    top_1_chunk: str | None = Field(None, description="the chunk that should rank first")
    top_1_span: Span | None = Field(None, description="the span that should rank first")

    _ids: dict[str, str] = PrivateAttr(default_factory=dict)  # target as written -> resolved id
    _top_1_chunk_id: str | None = PrivateAttr(None)
    _evidence: list[Evidence] = PrivateAttr(default_factory=list)  # per span, where it is now
    _decisive: list[tuple[int, int]] = PrivateAttr(default_factory=list)  # per span, its extent
    _derived: list[tuple[str, int]] = PrivateAttr(default_factory=list)  # spans' chunk grades
    _moves: list[Move] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _rules(self) -> Query:
        edge = self.query_type == "edge"
        if not edge and not self.query.strip():
            raise rule(("query",), "must not be empty unless query_type is edge")
        if len({split_chunk_id(t) is None for t in self.judgments}) > 1:
            raise rule(("judgments",), "mixes document and chunk targets; use one level")
        if self.judgments and self.spans:
            raise rule(("spans",), "give judgments or spans, not both")
        if self.top_1_chunk is not None and self.top_1_span is not None:
            raise rule(("top_1_span",), "give top_1_chunk or top_1_span, not both")
        best = max(self.grades, default=0)
        if best == 0 and not edge and self.judged:
            field = "spans" if self.spans else "judgments"
            raise rule((field,), "needs a target with grade >= 1 unless query_type is edge")
        if self.spans:
            check_primary(self.spans, self.primary, best)
        elif self.primary is None:
            if best >= 1:
                raise rule(("primary",), "field required when a target has grade >= 1")
        elif best == 0:
            raise rule(("primary",), "must be absent when no target has grade >= 1")
        elif self.primary not in self.judgments:
            raise rule(("primary",), f"{self.primary!r} is not a target in judgments")
        elif self.judgments[self.primary] != best:
            raise rule(
                ("primary",),
                f"{self.primary!r} has grade {self.judgments[self.primary]}, "
                f"but the highest grade in judgments is {best}",
            )
        if self.top_1_chunk is not None and split_chunk_id(self.top_1_chunk) is None:
            raise rule(("top_1_chunk",), "must be a chunk id '<document>:chunk:<n>'")
        return self

    @property
    def judged(self) -> bool:
        """Whether the query has any judgment yet: a new query (`rageval suite init`, then
        written by hand) starts with none, is pooled and graded, and is refused by the gate
        until it has some. An edge query needs none: nothing in the corpus answers it."""
        return self.query_type == "edge" or bool(self.judgments or self.spans)

    @property
    def grades(self) -> list[int]:
        return [s.grade for s in self.spans] or list(self.judgments.values())

    def _resolve(self, reference: Reference, at: tuple[str, int]) -> None:
        """Resolve every target to its canonical id, and place every span in the text as it is
        now (re-anchored when it moved); `at` is this query's place in the suite."""
        named_by: dict[str, str] = {}
        for target in self.judgments:
            loc = (*at, "judgments", target)
            try:
                resolved, _ = resolve_target(target, reference.chunk_counts, reference.mode)
            except TargetError as error:
                raise rule(loc, str(error)) from None
            if resolved in named_by:
                raise rule(loc, f"names {resolved!r}, already judged as {named_by[resolved]!r}")
            named_by[resolved] = target
            self._ids[target] = resolved
        placed = [
            reference.place(span, self.id, (*at, "spans", i)) for i, span in enumerate(self.spans)
        ]
        # Spans of one query may share a reference chunk (a judged region and the evidence
        # inside it), but not an excerpt: one excerpt has one grade.
        excerpts: dict[tuple[str, int, int], int] = {}
        for index, (resolved, evidence, _) in enumerate(placed):
            where = (evidence.doc_id, evidence.start, evidence.end)
            if where in excerpts:
                problem = f"repeats the excerpt of spans[{excerpts[where]}]: give it one grade"
                raise rule((*at, "spans", index), problem)
            excerpts[where] = index
            self._ids[str(index)] = resolved
        try:
            if self.top_1_chunk is not None:
                top = resolve_target(self.top_1_chunk, reference.chunk_counts, reference.mode)
                self._top_1_chunk_id = top[0]
        except TargetError as error:
            raise rule((*at, "top_1_chunk"), str(error)) from None
        if self.top_1_span is not None:
            placed_top = reference.place(self.top_1_span, self.id, (*at, "top_1_span"))
            self._top_1_chunk_id = placed_top[0]
            placed.append(placed_top)
        self._moves = [move for _, _, move in placed if move is not None]
        if self.spans:
            self._evidence = [evidence for _, evidence, _ in placed[: len(self.spans)]]
        elif self.level == "chunk":  # chunk-id judgments: their exact spans
            self._evidence = [reference.span_of(chunk) for chunk, _ in self.qrels]
        self._decisive = [self._decisive_part(reference, n, at) for n in range(len(self._evidence))]

    def _decisive_part(
        self, reference: Reference, index: int, at: tuple[str, int]
    ) -> tuple[int, int]:
        """The extent of span `index`'s decisive part (a chunk-id judgment's: its whole chunk)."""
        evidence = self._evidence[index]
        if not self.spans:
            return evidence.start, evidence.end
        span = self.spans[index]
        try:
            return span.decisive_part(reference.texts[evidence.doc_id], evidence)
        except QuoteError as error:
            where = f"query {self.id}, document {span.doc!r}, span {span.start}-{span.end}"
            raise rule((*at, "spans", index, "decisive"), f"{where}: {error}") from None

    @property
    def level(self) -> Level:
        """Chunk level when the targets are spans or chunk ids (all of them, by the rules), else
        document."""
        chunked = any(split_chunk_id(t) is not None for t in self.judgments)
        return "chunk" if chunked or self.spans else "document"

    @property
    def qrels(self) -> list[tuple[str, int]]:
        """(resolved id, grade) per judged target: each judgment in file order, or each
        reference chunk the spans judge with its derived grade (`core.suites.derived`: the
        highest grade of the spans it matches), in the order of the spans naming it."""
        if self.spans:
            return self._derived
        return [(self._ids[target], grade) for target, grade in self.judgments.items()]

    @property
    def written(self) -> list[str]:
        """How each of `qrels` is written in the file, for messages: the judgment's target, or
        the first span naming the chunk (`spans[2]`; the chunk id when it is only derived)."""
        first = {self.span_target(i): f"spans[{i}]" for i in reversed(range(len(self.spans)))}
        return [first.get(c, c) for c, _ in self._derived] if self.spans else list(self.judgments)

    def span_target(self, index: int) -> str:
        """The reference chunk span `index` names (its extent, else the one holding most of it)."""
        return self._ids[str(index)]

    @property
    def evidence(self) -> list[tuple[Evidence, int]]:
        """(span as it is now, grade) of each chunk-level judgment, in file order: the spans
        themselves, or the exact spans of judged reference chunks. Document-level judgments
        name no excerpt and have none."""
        if not self._evidence:
            return []
        return list(zip(self._evidence, self.grades, strict=True))

    @property
    def decisive(self) -> list[tuple[int, int]]:
        """[start, end) of each of `evidence`'s decisive part (core.suites.derived), in order."""
        return list(self._decisive)

    @property
    def primary_id(self) -> str | None:
        if self.spans:
            return next((self.span_target(i) for i, s in enumerate(self.spans) if s.primary), None)
        return self._ids[self.primary] if self.primary is not None else None

    @property
    def top_1_chunk_id(self) -> str | None:
        return self._top_1_chunk_id


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
