"""Datasets from disk into the pipeline's tables: BEIR folders and golden suites alike.

A dataset folder is either BEIR's layout (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`)
or a golden suite (`suite.json` / `suite.yaml`); `load_dataset` tells them apart, so suites go
through the same ingestion as BEIR datasets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.bounds import confined, input_bytes
from rageval_pipeline.core.io.formats import read_qrels
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.suites.golden import SUITE_FILES, Suite, load_suite

# The version of what this module and core.io.beir produce from a dataset folder (columns, types,
# normalisation): the ingestion assets' code version. Bump it when they change their output.
LOADER_VERSION = "loaders.2"  # 2: SPANS carry each nugget's decisive extent
_QUERY_ATTRIBUTES = ("intent", "category", "difficulty", "query_type")


class Dataset(NamedTuple):
    corpus: pd.DataFrame  # CORPUS
    queries: pd.DataFrame  # QUERIES
    qrels: pd.DataFrame  # QRELS, every split
    reference_chunking: ChunkingConfig | None  # a suite's chunking for chunk-level qrels


class SuiteTables(NamedTuple):
    corpus: pd.DataFrame  # tables.CORPUS
    queries: pd.DataFrame  # tables.QUERIES
    qrels: pd.DataFrame  # tables.QRELS


def suite_tables(suite: Suite) -> SuiteTables:
    """CORPUS, QUERIES and QRELS tables of a suite, rows in file order."""
    corpus = [
        dict(
            doc_id=d.id,
            title=d.title,
            text=d.text,
            url=d.url or "",
            metadata=_json({**d.metadata, "type": d.type, "format": d.format, "tags": d.tags}),
        )
        for d in suite.documents
    ]
    queries = [
        dict(
            query_id=q.id,
            text=q.query,
            intent=q.intent,
            category=q.category,
            difficulty=q.difficulty,
            query_type=q.query_type,
            metadata=_json(
                {
                    "description": q.description,
                    "primary": q.primary_id,
                    "top_1_chunk": q.top_1_chunk_id,
                }
            ),
        )
        for q in suite.queries
    ]
    qrels = [
        dict(split="test", query_id=q.id, doc_id=doc_id, relevance=grade, level=q.level)
        for q in suite.queries
        for doc_id, grade in q.qrels
    ]
    return SuiteTables(
        corpus=_frame(corpus, tables.CORPUS),
        queries=_frame(queries, tables.QUERIES),
        qrels=_frame(qrels, tables.QRELS),
    )


def suite_spans(suite: Suite) -> pd.DataFrame:
    """The SPANS table of a suite (split "test", rows in file order): every chunk-level
    judgment as the span of text it judges. A span judgment is where its text is now
    (re-anchored when it moved: `Suite.moves`), a chunk-id judgment is its reference chunk's
    exact span; document-level judgments name no excerpt and have none."""
    rows = [
        dict(split="test", query_id=q.id, relevance=grade, **span._asdict())
        | dict(decisive_start=key[0], decisive_end=key[1])
        for q in suite.queries
        for (span, grade), key in zip(q.evidence, q.decisive, strict=True)
    ]
    return _frame(rows, tables.SPANS)


def suite_qrels(
    suite: Suite,
    *,
    chunking: ChunkingConfig | None = None,
    run: pd.DataFrame | None = None,
    source: str | Path | None = None,
) -> pd.DataFrame:
    """The chunk-level QRELS a suite's spans derive (`EvidenceSet.qrels`, what the pipeline
    judges a run by) for the chunks of `chunking` (`reference`: the suite's own), or for the
    passages `run` (read from `source`) names; a run id that is no passage of the suite is
    refused in one line."""
    from rageval_pipeline.core.suites.chunking import chunk_once
    from rageval_pipeline.core.suites.derived import EvidenceSet
    from rageval_pipeline.core.suites.passages import Locator, split_passage_id

    corpus = suite_tables(suite).corpus
    spans = suite_spans(suite)
    if chunking is not None:
        chunks = chunk_once(corpus, chunking.resolve(suite.chunking))
        return EvidenceSet.of(spans, corpus, chunks).qrels()
    assert run is not None
    locator = Locator(corpus)
    for doc_id in run["doc_id"].dropna().astype(str).unique():
        parts = split_passage_id(doc_id)
        problem = "is not a passage id `doc:span:start-end`" if parts is None else None
        problem = problem or locator.extent(*parts)
        if problem is not None:
            raise InputError(source, f"{doc_id!r}: {problem}", field="doc_id")
    return EvidenceSet.of(spans, corpus, None).with_passages(run).qrels()


def span_moves(folder: Path) -> list[str]:
    """One line per judged span of a suite folder whose text moved and was re-anchored (none
    for BEIR): what ingestion reports beside the tables."""
    path = suite_file(folder)
    return [] if path is None else [m.describe() for m in load_suite(path).moves]


def _frame(rows: list[dict[str, Any]], schema: pa.Schema) -> pd.DataFrame:
    return tables.conform(pd.DataFrame(rows, columns=schema.names), schema).to_pandas()


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def suite_file(folder: Path) -> Path | None:
    return next((folder / n for n in SUITE_FILES if (folder / n).exists()), None)


def require_judged(folder: Path) -> None:
    """The gate's one-line refusal of a golden suite holding a query not yet judged (a new
    suite's query before its sheet is merged): such a query would count as a failure of every
    system. BEIR folders always carry their qrels."""
    if (path := suite_file(folder)) is None:
        return
    if unjudged := load_suite(path).unjudged:
        ids = ", ".join(q.id for q in unjudged[:3]) + (", ..." if len(unjudged) > 3 else "")
        raise InputError(
            path,
            f"{len(unjudged)} query(ies) not yet judged ({ids}): the gate does not gate an "
            "unjudged query; judge them (`rageval pool`, `rageval pool merge`) or remove them",
        )


def load_dataset(folder: Path) -> Dataset:
    """Load a BEIR folder or a golden-suite folder."""
    if (path := suite_file(folder)) is not None:
        suite = load_suite(path)
        t = suite_tables(suite)
        return Dataset(t.corpus, t.queries, t.qrels, suite.chunking)
    return Dataset(
        read_corpus(_inside(folder, "corpus.jsonl")),
        read_queries(_inside(folder, "queries.jsonl")),
        read_beir_qrels(_inside(folder, "qrels")),
        None,
    )


def _inside(folder: Path, name: str) -> Path:
    """`folder / name`, which must not lead out of the folder (`bounds.confined`)."""
    try:
        confined(folder, name, exists=False)
    except ValueError as exc:
        if "not a regular file" not in str(exc):  # (a folder, a FIFO: said when read)
            raise InputError(folder / name, str(exc)) from None
    return folder / name


def load_part(folder: Path, part: str, *, dataset: str) -> pd.DataFrame:
    """One of `corpus`, `queries`, `qrels`, `spans` of a dataset folder (a BEIR part reads one
    file; BEIR judges no spans).

    Documents without a URL get `rageval://{dataset}/{doc_id}`, so every chunk carries a
    resolvable source (a missing url is incomplete metadata: `chunking.CHUNK_METADATA`).
    """
    if part == "spans":
        path = suite_file(folder)
        return tables.empty(tables.SPANS) if path is None else suite_spans(load_suite(path))
    if suite_file(folder) is not None:
        df = getattr(load_dataset(folder), part)
    elif part == "corpus":
        df = read_corpus(_inside(folder, "corpus.jsonl"))
    elif part == "queries":
        df = read_queries(_inside(folder, "queries.jsonl"))
    elif part == "qrels":
        df = read_beir_qrels(_inside(folder, "qrels"))
    else:
        raise ValueError(f"unknown dataset part {part!r}")
    if part == "corpus":
        df = df.assign(
            url=df["url"].where(df["url"] != "", "rageval://" + dataset + "/" + df["doc_id"])
        )
    return df


def judged_queries(queries: pd.DataFrame, qrels: pd.DataFrame, split: str) -> pd.DataFrame:
    """The queries judged in `split`, by id (BEIR's queries.jsonl holds every split's queries)."""
    judged = set(qrels.loc[qrels["split"] == split, "query_id"])
    return queries[queries["query_id"].isin(judged)].sort_values("query_id", kind="mergesort")


def reference_chunking(folder: Path) -> ChunkingConfig | None:
    """A suite's reference chunking (what its chunk ids are numbered under); None for BEIR."""
    path = suite_file(folder)
    return None if path is None else load_suite(path).chunking


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def jsonl_rows(path: Path, limit: str = "data_bytes") -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line. Each line is one JSON document, so it is
    parsed on its own (json's C parser); NaN and Infinity, which JSON does not have, are refused.
    The file is read within the `FileLimits` field `limit`, gzipped or not: a run's or qrels'
    (RAGEVAL_MAX_DATA_BYTES) by default, `file_bytes` for what a person writes (a judging
    sheet), `corpus_bytes` for a BEIR corpus."""
    gzipped = "decompressed_bytes" if limit == "data_bytes" else limit
    path, data = input_bytes(path, limit, gzipped)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(path, f"is not UTF-8 text (byte {exc.start})", line=line) from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"invalid JSON ({exc.msg})", line=number) from None
        except (ValueError, RecursionError) as exc:
            problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise InputError(path, f"invalid JSON ({problem})", line=number) from None
        if not isinstance(obj, dict):
            raise InputError(path, "expected a JSON object", line=number)
        yield number, obj


def _text(path: Path, number: int, obj: dict, field: str, *, required: bool) -> str:
    value = obj.get(field)
    if value is None:
        if required:
            raise InputError(path, "missing required field", line=number, field=field)
        return ""
    if not isinstance(value, str):
        raise InputError(
            path, f"expected a string, got {type(value).__name__}", line=number, field=field
        )
    return value


def _ids_unique(path: Path, ids: list[str], lines: list[int]) -> None:
    repeated = np.flatnonzero(pd.Series(ids, dtype=object).duplicated().to_numpy())
    if repeated.size:
        row = int(repeated[0])
        first = ids.index(ids[row])
        raise InputError(
            path,
            f"duplicate _id {ids[row]!r} (first on line {lines[first]})",
            line=lines[row],
            field="_id",
        )


def read_corpus(path: Path) -> pd.DataFrame:
    """BEIR corpus.jsonl: `_id`, `title`, `text`, optional `metadata` (its `url` is lifted)."""
    rows, lines = [], []
    for number, obj in jsonl_rows(path, "corpus_bytes"):
        meta = obj.get("metadata") or {}
        rows.append(
            dict(
                doc_id=_text(path, number, obj, "_id", required=True),
                title=_text(path, number, obj, "title", required=False),
                text=_text(path, number, obj, "text", required=True),
                url=str(meta.get("url") or "") if isinstance(meta, dict) else "",
                metadata=json.dumps(meta, sort_keys=True, ensure_ascii=False),
            )
        )
        lines.append(number)
    _ids_unique(path, [r["doc_id"] for r in rows], lines)
    return _table(rows, tables.CORPUS)


def read_queries(path: Path) -> pd.DataFrame:
    """BEIR queries.jsonl; intent/category/difficulty/query_type are read from `metadata`."""
    rows, lines = [], []
    for number, obj in jsonl_rows(path):
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise InputError(path, "expected an object", line=number, field="metadata")
        row = dict(
            query_id=_text(path, number, obj, "_id", required=True),
            text=_text(path, number, obj, "text", required=True),
            metadata=json.dumps(meta, sort_keys=True, ensure_ascii=False),
        )
        for attribute in _QUERY_ATTRIBUTES:
            value = meta.get(attribute)
            row[attribute] = None if value is None else str(value)
        rows.append(row)
        lines.append(number)
    _ids_unique(path, [r["query_id"] for r in rows], lines)
    return _table(rows, tables.QUERIES)


def read_beir_qrels(folder: Path) -> pd.DataFrame:
    """Every `<split>.tsv` (or `.txt`) in a qrels folder, 3- or 4-column, split from the name."""
    files = sorted([*folder.glob("*.tsv"), *folder.glob("*.txt")])
    if not files:
        raise InputError(folder, "no qrels files (<split>.tsv) found")
    files = [_inside(folder, f.name) for f in files]
    return pd.concat([read_qrels(f, split=f.stem) for f in files], ignore_index=True)


def _table(rows: list[dict], schema) -> pd.DataFrame:
    if not rows:
        return tables.empty(schema)
    return tables.conform(pd.DataFrame.from_records(rows), schema).to_pandas()
