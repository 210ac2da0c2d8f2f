"""Pooling a golden suite: run several systems, list the top-k targets nobody has judged.

A suite is only as good as its judgments: a system that finds a relevant chunk nobody judged is
scored as if it had found nothing. Pooling (as TREC does) runs a set of diverse systems, takes
the union of their top k per query, and hands every target without a judgment to a human
assessor (`core.curation.judging` writes and merges the sheet). Each chunk target carries its
span, the reference chunk's character offsets in its document, so that a grade is stored as
that span.

Targets are what the suite judges: for a chunk-level suite, chunk ids under the suite's
reference chunking; for a document-level (entity) suite, document ids. A system on another
chunking (fixed windows, paragraphs) returns its own units; each is mapped to the reference
chunks it covers (see `to_reference`). The systems run in process through the core, exactly as
the pipeline runs them, but into a throwaway folder.

`difficulty` measures how hard a query is from where the pooled systems rank its best targets.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from statistics import mean

import pandas as pd
from pydantic import BaseModel, ConfigDict

from rageval_pipeline.core.io.chunk_ids import split_chunk_id
from rageval_pipeline.core.io.ranking import to_document_level
from rageval_pipeline.core.suites.chunking import (
    ChunkingConfig,
    StoredChunks,
    chunks_of,
    split_text,
)
from rageval_pipeline.core.suites.consistency import target_text
from rageval_pipeline.core.suites.golden import Suite
from rageval_pipeline.core.suites.loaders import suite_tables
from rageval_pipeline.core.suites.matching import Level
from rageval_pipeline.core.suites.passages import split_passage_id
from rageval_pipeline.core.systems import BM25System, DenseSystem, Log, RunInputs, SystemConfig

DEFAULT_DEPTH = 20
# Systems run this deep (the pipeline's default top_k) whatever the pool depth, so a fused system
# fuses the member lists the pipeline gives it, and a document-level suite sees its top k
# documents, not only the documents of its top k chunks.
RUN_DEPTH = 100
# Diverse systems added to the configured ones: same retrievers, other units of text, so the
# pool is not only what the reference chunking makes easy to find.
EXTRA_CHUNKINGS = {
    "fixed128": ChunkingConfig(strategy="fixed", size=128, overlap=32),
    "paragraph": ChunkingConfig(strategy="paragraph"),
}
# A unit of another chunking counts as retrieving a reference chunk when their token overlap is
# at least half of either of them: a window that holds a whole section retrieves it; a window
# that grazes the first line of the next section does not.
COVER = 0.5
# Difficulty thresholds on the mean reciprocal rank of a query's best target (see difficulty).
EASY_AT, HARD_BELOW = 2 / 3, 1 / 4


def extra_systems() -> dict[str, SystemConfig]:
    """BM25 and dense on each of EXTRA_CHUNKINGS, named e.g. `bm25-fixed128`."""
    out: dict[str, SystemConfig] = {}
    for label, chunking in EXTRA_CHUNKINGS.items():
        out[f"bm25-{label}"] = BM25System(retriever="bm25", chunking=chunking)
        out[f"dense-{label}"] = DenseSystem(retriever="dense", chunking=chunking)
    for name, system in out.items():
        system._name = name  # as load_systems names a configured one (progress lines)
    return out


def suite_level(suite: Suite) -> Level:
    """The level the suite judges at: chunk when any query judges chunks or spans; before any
    judgment (a new suite), chunk when its reference chunking cuts documents into sections."""
    if not any(q.qrels for q in suite.queries):
        return "document" if suite.chunking.strategy == "document" else "chunk"
    return "chunk" if any(q.level == "chunk" for q in suite.queries) else "document"


def run_systems(
    suite: Suite,
    systems: Mapping[str, SystemConfig],
    k: int,
    *,
    embeddings_dir: Path,
    base_dir: Path,
    queries: pd.DataFrame | None = None,
    log: Log | None = None,
    stored_chunks: StoredChunks | None = None,
    built: Callable[[str, dict], None] | None = None,
) -> dict[str, pd.DataFrame]:
    """The RUN table of every system over every query of the suite (edge queries included),
    or over `queries` (a QUERIES table, e.g. synthetic queries) on the suite's documents.

    Fusion members are run first whatever order `systems` is in; `base_dir` is the systems
    file's folder (for run files and Python entry points). `log` hears each system as it
    starts and ends, and an embedding's progress (done, rate, ETA). `stored_chunks`: the
    documents chunked by a chunking, as the caller has them stored (`chunks_of`). `built`
    hears each indexed system's build metadata (what its embedding took).
    """
    tables = suite_tables(suite)
    if queries is not None:
        tables = tables._replace(queries=queries)
    runs: dict[str, pd.DataFrame] = {}
    with tempfile.TemporaryDirectory(prefix="rageval-pool-") as work:

        def run(name: str) -> pd.DataFrame:
            if name in runs:
                return runs[name]
            system, directory = systems[name], Path(work) / name
            members = {m: run(m) for m in system.member_names}
            start = time.perf_counter()
            say = log or (lambda _: None)
            if system.indexed:
                chunking = system.run_chunking(suite.chunking)
                indexed = chunks_of(tables.corpus, chunking, stored_chunks)
                new = len(system.to_embed(indexed, embeddings_dir)[0])
                embedding = f", {new:,} to embed" if new else ""
                say(f"{name}: indexing {len(indexed):,} chunks ({_describe(chunking)}){embedding}")
                meta = system.build_index(
                    indexed, directory, embeddings_dir=embeddings_dir, log=log
                )
                if built is not None:
                    built(name, meta)
            corpus = tables.corpus if system.reads_corpus else None  # passages, reranking
            # As the pipeline builds them: a reranker resolves its candidates' `reference`
            # chunking against the suite's, else it would read the default chunking's text.
            inputs = RunInputs(
                tables.queries,
                k,
                directory,
                base_dir,
                members,
                corpus=corpus,
                reference=suite.chunking,
                stored_chunks=stored_chunks,
                embeddings_dir=embeddings_dir,
            )
            runs[name] = system.produce_run(inputs)
            say(
                f"{name}: ran {len(tables.queries):,} queries "
                f"({len(runs)}/{len(systems)} systems, {time.perf_counter() - start:.1f} s)"
            )
            return runs[name]

        for name in systems:
            run(name)
    return runs


def _describe(chunking: ChunkingConfig) -> str:
    sized = chunking.strategy in ("fixed", "token", "sentence", "recursive")
    return f"{chunking.strategy} {chunking.size}/{chunking.overlap}" if sized else chunking.strategy


def unit_chunking(system: SystemConfig, reference: ChunkingConfig) -> ChunkingConfig | None:
    """The chunking of the ids a system returns; None for whole documents or unknown units."""
    if system.member_names:  # fusion, or a reranker (its candidates' ids, no `level`)
        if getattr(system, "level", "chunk") == "document":
            return None
        return unit_chunking(system.member(system.member_names[0]), reference)
    if system.indexed:
        return system.run_chunking(reference)
    return reference  # external systems answer with the suite's own ids


def _token_spans(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    """[start, end) in whitespace tokens of each chunk of `text` (chunks are runs of tokens)."""
    if config.strategy == "fixed":  # the windows of chunking._windows, as token ranges
        total, step, spans = len(text.split()), config.size - config.overlap, []
        for start in range(0, max(total, 1), step):
            spans.append((start, min(start + config.size, total)))
            if start + config.size >= total:
                break
        return spans
    spans, cursor = [], 0
    for chunk in split_text(text, config):
        n = len(chunk.split())
        spans.append((cursor, cursor + n))
        cursor += n
    return spans


class ReferenceMap:
    """Maps the units of any chunking of a suite's documents to its reference chunk ids."""

    def __init__(self, suite: Suite) -> None:
        self.reference = suite.chunking
        self.texts = {d.id: d.text for d in suite.documents}
        self._spans: dict[tuple[str, ChunkingConfig], list[tuple[int, int]]] = {}

    def spans(self, doc_id: str, config: ChunkingConfig) -> list[tuple[int, int]]:
        key = (doc_id, config)
        if key not in self._spans:
            self._spans[key] = _token_spans(self.texts[doc_id], config)
        return self._spans[key]

    def to_reference(self, unit_id: str, config: ChunkingConfig) -> list[str]:
        """The reference chunk ids a unit covers (itself under the reference chunking); a
        passage an outside chunker returned (`core.suites.passages`) by its own extent, a whole
        document by all of its sections."""
        passage = split_passage_id(unit_id)
        if passage is not None and passage[0] in self.texts:
            doc_id, first, last = passage
            text = self.texts[doc_id]  # its characters as whitespace-token positions
            return self._covered(doc_id, len(text[:first].split()), len(text[:last].split()))
        parsed = split_chunk_id(unit_id)
        if parsed is None and unit_id in self.texts:
            # A whole document (an outside system scored by document): it is judged by its
            # best section, so every section of it is pooled at its rank.
            return self._covered(unit_id, 0, len(self.texts[unit_id].split()))
        if parsed is None or parsed[0] not in self.texts:
            return []
        doc_id, index = parsed
        if config == self.reference:
            return [unit_id]
        units = self.spans(doc_id, config)
        if index >= len(units):
            return []
        return self._covered(doc_id, *units[index])

    def _covered(self, doc_id: str, start: int, end: int) -> list[str]:
        """The reference chunks that tokens [start, end) of `doc_id` cover (COVER)."""
        out = []
        for n, (r_start, r_end) in enumerate(self.spans(doc_id, self.reference)):
            shared = min(end, r_end) - max(start, r_start)
            if shared > 0 and shared >= COVER * min(end - start, r_end - r_start):
                out.append(f"{doc_id}:chunk:{n}")
        return out


def target_ranks(
    suite: Suite, systems: Mapping[str, SystemConfig], runs: Mapping[str, pd.DataFrame], k: int
) -> pd.DataFrame:
    """Best rank of each target per (query, system) within the top k: query_id, target_id,
    system, rank. Targets are at the suite's judgment level."""
    level = suite_level(suite)
    mapper = ReferenceMap(suite)
    rows = []
    for name, run in runs.items():
        config = unit_chunking(systems[name], suite.chunking)
        if level == "document":
            run = to_document_level(run)  # a document ranks where its best chunk does
        hits = run[run["doc_id"].notna() & (run["rank"] <= k)]
        for query_id, unit, source, rank in hits[
            ["query_id", "doc_id", "source_id", "rank"]
        ].itertuples(index=False):
            if level == "document":
                targets = [source or unit]
            elif config is None:
                targets = []  # whole-document units name no chunk
            else:
                targets = mapper.to_reference(unit, config)
            rows += [(query_id, t, name, int(rank)) for t in targets]
    frame = pd.DataFrame(rows, columns=["query_id", "target_id", "system", "rank"])
    return frame.groupby(["query_id", "target_id", "system"], as_index=False, sort=True)[
        "rank"
    ].min()


# A sheet row shows the passage trimmed to this many characters around the query's words, so
# that an assessor reads a screen of rows, not a wall of sections; target_text keeps it whole.
EXCERPT_CHARS = 320
_TERM = re.compile(r"[^\W_]{3,}")


def excerpt(query: str, text: str, width: int = EXCERPT_CHARS) -> str:
    """`text` trimmed to the `width` characters holding the most occurrences of the query's
    words (3 letters or more, any case), cut at spaces, `…` where text was cut."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    terms = {t.lower() for t in _TERM.findall(query)}
    hits = [m.start() for m in _TERM.finditer(flat) if m.group().lower() in terms]
    best = max(hits, key=lambda h: sum(h <= o < h + width for o in hits), default=0)
    start = max(0, min(best - width // 4, len(flat) - width))
    if start:
        start = flat.find(" ", start) + 1 or start
    end = start + width
    if end < len(flat):
        end = flat.rfind(" ", start, end) if flat.rfind(" ", start, end) > start else end
    return ("…" if start else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")


class PoolEntry(BaseModel):
    """One unjudged target that some system put in its top k for a query."""

    model_config = ConfigDict(frozen=True)

    query_id: str
    query: str
    excerpt: str = ""  # the passage trimmed around the query's words (`excerpt`)
    target_id: str
    # The target's span: the reference chunk's characters [start, end) in document doc_id (a
    # grade merged back is stored as that span); no offsets for a whole-document target.
    doc_id: str | None = None
    start: int | None = None
    end: int | None = None
    target_text: str
    systems: str  # "bm25@3 dense@1", by system name
    best_rank: int


def unjudged(suite: Suite, ranks: pd.DataFrame) -> list[PoolEntry]:
    """Every pooled target without a judgment, by query (file order) then best rank, id."""
    judged = {(q.id, t) for q in suite.queries for t, _ in q.qrels}
    return pool_entries(suite, ranks, {q.id: q.query for q in suite.queries}, judged)


def pool_entries(
    suite: Suite,
    ranks: pd.DataFrame,
    text_of: Mapping[str, str],
    judged: set[tuple[str, str]] = frozenset(),
) -> list[PoolEntry]:
    """Sheet rows of the pooled targets of the queries in `text_of` (in its order) that are
    not `judged`; the texts are the suite's (also for companion, e.g. synthetic, queries)."""
    level = suite_level(suite)
    order = {q: i for i, q in enumerate(text_of)}
    ranks = ranks[ranks["query_id"].isin(order)]
    out = []
    for (query_id, target_id), group in ranks.groupby(["query_id", "target_id"], sort=False):
        if (query_id, target_id) in judged:
            continue
        group = group.sort_values(["rank", "system"])
        span = suite.reference.span_of(target_id) if level == "chunk" else None
        out.append(
            PoolEntry(
                query_id=query_id,
                query=text_of[query_id],
                target_id=target_id,
                doc_id=target_id if span is None else span.doc_id,
                start=None if span is None else span.start,
                end=None if span is None else span.end,
                excerpt=excerpt(text_of[query_id], target_text(suite, target_id)),
                target_text=target_text(suite, target_id),
                systems=" ".join(
                    f"{s}@{r}" for s, r in zip(group["system"], group["rank"], strict=True)
                ),
                best_rank=int(group["rank"].min()),
            )
        )
    return sorted(out, key=lambda e: (order[e.query_id], e.best_rank, e.target_id))


def difficulty(suite: Suite, ranks: pd.DataFrame, systems: list[str], k: int) -> dict[str, str]:
    """Measured difficulty of each query from the pooled systems' rankings.

    For each system, the reciprocal rank of the first target carrying the query's highest
    grade (0 when none is in the top k); `ease` is the mean over `systems`. easy when
    ease >= EASY_AT (on average the best answer is at rank 1-1.5), hard when ease < HARD_BELOW
    (on average below rank 4), medium otherwise. A query with no target of grade >= 1 (an edge
    query: nothing in the corpus answers it) is hard: no ranking can find its answer.
    """
    out = {}
    for query in suite.queries:
        best = max(query.grades, default=0)
        if best == 0:
            out[query.id] = "hard"
            continue
        tops = {target for target, grade in query.qrels if grade == best}
        mine = ranks[(ranks["query_id"] == query.id) & ranks["target_id"].isin(tops)]
        first = mine.groupby("system")["rank"].min()
        ease = mean(1.0 / first[s] if s in first.index and first[s] <= k else 0.0 for s in systems)
        out[query.id] = "easy" if ease >= EASY_AT else "hard" if ease < HARD_BELOW else "medium"
    return out
