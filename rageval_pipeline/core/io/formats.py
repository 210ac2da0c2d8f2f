"""Readers and writers for TREC runs, TREC and BEIR qrels, and Parquet.

Readers return tables shaped like `core.io.tables` QRELS and RUN. A file is one known format
exactly, told from its content (Parquet magic bytes, the BEIR header line), never from its name,
and anything else is refused with the accepted formats listed: nothing is guessed. Text is parsed
column-wise (`core.io.delimited`); Parquet is checked against the expected schema, with casts
only where they lose nothing (`core.io.parquet_columns`). Gzip-compressed files are read as their
content.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.bounds import input_bytes
from rageval_pipeline.core.io.delimited import (
    PARQUET_MAGIC,
    Fetched,
    distinct_pair_keys,
    exact_table,
    fast_table,
    first_line,
    read_text,
)
from rageval_pipeline.core.io.field_checks import TextFormat
from rageval_pipeline.core.io.keys import arrow_strings, id_block_starts, whole_query_pieces
from rageval_pipeline.core.io.parquet_columns import no_nulls, no_repeat, read_checked
from rageval_pipeline.core.io.ranking import RankedRun, order_run, ranked_table

if TYPE_CHECKING:
    # Not at run time: reading a file's columns needs no pandas (0.4 s to import), so
    # `rageval eval` parses the run in a thread (`delimited.fetch`) while pandas imports.
    # Tables reach pandas through pyarrow's to_pandas, which imports it when first called.
    import pandas as pd

TREC_RUN = TextFormat(
    "a TREC run",
    ("query_id", "iteration", "doc_id", "rank", "score", "tag"),
    tab=False,
    integers=("rank",),
    reals=("score",),
)
TREC_QRELS = TextFormat(
    "TREC qrels",
    ("query_id", "iteration", "doc_id", "relevance"),
    tab=False,
    integers=("relevance",),
)
BEIR_QRELS = TextFormat(
    "BEIR qrels",
    ("query_id", "doc_id", "relevance"),
    tab=True,
    integers=("relevance",),
    header="query-id\tcorpus-id\tscore",
)
RUN_FORMATS = (
    "TREC run (6 whitespace-separated fields: query_id Q0 doc_id rank score tag), "
    "Parquet run (query_id, doc_id, score; optional source_id, rank, latency_ms, "
    "baseline_latency_ms)"
)
QRELS_FORMATS = (
    "TREC qrels (4 whitespace-separated fields: query_id iteration doc_id relevance), "
    "BEIR qrels (header query-id<TAB>corpus-id<TAB>score, then 3 tab-separated fields), "
    "Parquet qrels (query_id, doc_id, relevance; optional split, level)"
)
# Parquet columns: required, then optional, with the type each is read as.
_RUN_PARQUET = (
    {"query_id": pa.string(), "doc_id": pa.string(), "score": pa.float64()},
    {
        "source_id": pa.string(),
        "rank": pa.int32(),
        "latency_ms": pa.float64(),
        "baseline_latency_ms": pa.float64(),  # the pipeline's own runs (tables.RUN)
    },
)
_QRELS_PARQUET = (
    {"query_id": pa.string(), "doc_id": pa.string(), "relevance": pa.int32()},
    {"split": pa.string(), "level": pa.string()},
)
# Ids read for scoring as the text reader makes them (`RankedRun`'s type), with no cast.
_LARGE_IDS = {"query_id": pa.large_string(), "doc_id": pa.large_string()}


def read_qrels(path: str | Path, split: str | None = None) -> pd.DataFrame:
    """Read TREC (`q1 0 doc 1`), BEIR (`query-id corpus-id score` TSV) or Parquet qrels.

    Returns a QRELS table; `split` fills the split column (Parquet keeps its own when None).
    """
    return read_keyed_qrels(path, split)[0]


def read_keyed_qrels(
    path: str | Path, split: str | None = None
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """`read_qrels`, and the `keys.pair_keys` of the rows when the text reader made them (all
    distinct), for `measures.join.Judgments.of`; else None."""
    table, keys = read_keyed_qrels_table(path, split)
    return table.to_pandas(), keys


def read_keyed_qrels_table(
    path: str | Path, split: str | None = None
) -> tuple[pa.Table, np.ndarray | None]:
    """`read_keyed_qrels` in Arrow: for the measures engine, which takes either, with no
    pandas (`rageval eval`'s Arrow path)."""
    path, data = input_bytes(path)
    keys = None
    if data[:4] == PARQUET_MAGIC:
        table = read_checked(path, data, _QRELS_PARQUET, QRELS_FORMATS)
        no_nulls(path, table, ("query_id", "doc_id", "relevance"))
        rows = np.arange(table.num_rows)
        no_repeat(path, table.column("query_id"), table.column("doc_id"), rows, "judges")
        if split is not None or "split" not in table.column_names:
            table = _set(table, "split", split)
        if "level" not in table.column_names:
            table = _set(table, "level", "document")
    else:
        beir = first_line(data) == BEIR_QRELS.header.encode()
        fmt = BEIR_QRELS if beir else TREC_QRELS
        table, keys = read_text(path, data, fmt, QRELS_FORMATS)
        table = _set(_set(table, "split", split), "level", "document")
    if not table.num_rows:
        raise InputError(path, "has no judgments")
    return _shaped_table(table, tables.QRELS), keys


def _set(table: pa.Table, name: str, value: str | None) -> pa.Table:
    """`table` with column `name` holding `value` on every row."""
    column = pa.repeat(pa.scalar(value, pa.string()), table.num_rows)
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, column)
    return table.append_column(name, column)


def _shaped(table: pa.Table, schema: pa.Schema) -> pd.DataFrame:
    """`_shaped_table` in pandas."""
    return _shaped_table(table, schema).to_pandas()


def _shaped_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` cast to `schema`; the schema's OPTIONAL columns it lacks are nulls."""
    columns = [
        pa.nulls(table.num_rows, schema.field(n).type)
        if n in tables.OPTIONAL and n not in table.column_names
        else table.column(n).cast(schema.field(n).type)
        for n in schema.names
    ]
    return pa.table(columns, schema=schema)


def read_run(path: str | Path) -> pd.DataFrame:
    """Read a TREC run (`qid Q0 doc rank score tag`) or a Parquet run into a RUN table.

    Ranks are recomputed in trec_eval order (score desc, doc id desc); the file's rank column
    is checked to be an integer but not trusted. Text runs get source_id = doc_id and no latency.
    """
    path, data = input_bytes(path)
    if data[:4] == PARQUET_MAGIC:
        return _parquet_run(path, read_checked(path, data, _RUN_PARQUET, RUN_FORMATS))
    table = _ranked_text(path, data, None).table()
    doc = table.column("doc_id")
    table = table.append_column("source_id", doc)
    return _shaped(table.append_column("latency_ms", pa.nulls(len(doc), pa.float64())), tables.RUN)


def read_ranked_run(path: str | Path | Fetched) -> RankedRun | pd.DataFrame:
    """`read_run` for scoring: a run stays in Arrow as a RankedRun (checked and ordered,
    which the measures engine takes as it is); a Parquet run with placeholder rows (no doc
    id) or source ids is `read_run`'s table. `path` may be the file `delimited.fetch`ed as
    TREC_RUN: its reading is finished here."""
    ahead = path if isinstance(path, Fetched) else None
    path, data = (ahead.path, ahead.data) if ahead is not None else input_bytes(path)
    if data[:4] == PARQUET_MAGIC:
        table = read_checked(path, data, _RUN_PARQUET, RUN_FORMATS, _LARGE_IDS)
        return _ranked_parquet(path, table) or _parquet_run(path, table)
    return _ranked_text(path, data, ahead)


def _ranked_text(path: Path, data: bytes, ahead: Fetched | None) -> RankedRun:
    """A TREC run's bytes (`ahead`: `fetch`ed) as a RankedRun."""
    table = fast_table(data, TREC_RUN, ahead)
    if table is not None and table.num_rows and (run := _keyed(table)) is not None:
        return run
    table = exact_table(path, data, TREC_RUN, RUN_FORMATS)
    if not table.num_rows:
        raise InputError(path, "has no results")
    return ranked_table(table)[0]


def _keyed(table: pa.Table) -> RankedRun | None:
    """A checked run table as a RankedRun with its pair keys; None when two keys of a query
    are equal (a repeated pair, or a fingerprint collision: the caller's slower path decides).

    Named fast path: the keys (fingerprints, then a sort for repeats) are made in pieces of
    whole queries by two threads while this one finds the trec_eval order; all three run numpy
    and Arrow kernels, which release the GIL, and a repeat lies within one query, so within one
    piece. On the bench's runs (bench/README.md, "Fast paths in one place"; quiet, best of 5
    in one process): 5M tied TREC rows 0.22 s against 0.31 s with the keys made in this
    thread before the order, 50,000 x 100 Parquet 0.15 s against 0.22 s."""
    # The query blocks, found once for the keys' salt and the order (24 ms on 5M rows).
    query = arrow_strings(table.column("query_id"))
    starts = id_block_starts(query)
    edges = whole_query_pieces(query, starts, 4)
    firsts = np.searchsorted(starts, edges)  # each piece's first block
    keys = np.empty(len(table), np.uint64)

    def piece(a: int, b: int, i: int, j: int) -> bool:
        """Whether rows a..b (blocks i..j) have distinct keys, written into `keys`."""
        made = distinct_pair_keys(table.slice(a, b - a), TREC_RUN, starts[i:j] - a)
        if made is not None:
            keys[a:b] = made
        return made is not None

    with ThreadPoolExecutor(max_workers=2) as pool:
        cuts = zip(edges[:-1], edges[1:], firsts[:-1], firsts[1:], strict=True)
        distinct = [pool.submit(piece, *cut) for cut in cuts]
        run, moves = ranked_table(table, starts)
        if not all(done.result() for done in distinct):
            return None
    if moves is not None:  # the keys in trec_eval order, as the engine reads them
        positions, rows = moves
        keys[positions] = keys[rows]
    return replace(run, pair_keys=keys)


def _ranked_parquet(path: Path, table: pa.Table) -> RankedRun | None:
    """A Parquet run's checked columns (`_parquet`) as a RankedRun, as a TREC run's are: kept
    in Arrow, put in trec_eval order without a sort of the whole run. None when a row has no
    doc id (a query that retrieved nothing), the file gives source ids, or a (query, doc) pair
    repeats: `_parquet_run` reads those.

    Named fast path: on the bench's 5M-row run with tied scores (bench/README.md, "Issue
    46"), reading and ordering took 0.84 s of CPU against 1.88 s through pandas (`order_run`
    sorting all 5M rows by strings, on one core), and `rageval eval` 2.2-2.6 s against 7.1 s
    (best of 3, loaded machine)."""
    if "source_id" in table.column_names or table.column("doc_id").null_count:
        return None
    no_nulls(path, table, ("query_id", "score"))
    if not table.num_rows:
        raise InputError(path, "has no results")
    return _keyed(table)


def _parquet_run(path: Path, table: pa.Table) -> pd.DataFrame:
    """A Parquet run's checked columns (`_parquet`) as a RUN table in trec_eval order,
    placeholder rows kept."""
    hits = table.column("doc_id").is_valid()
    no_nulls(path, table, ("query_id",))
    no_nulls(path, table, ("score",), hits)
    rows = np.flatnonzero(hits.to_numpy(zero_copy_only=False))
    no_repeat(path, table.column("query_id"), table.column("doc_id"), rows, "retrieves")
    if "source_id" not in table.column_names:
        table = table.append_column("source_id", table.column("doc_id"))
    if "latency_ms" not in table.column_names:
        table = table.append_column("latency_ms", pa.nulls(table.num_rows, pa.float64()))
    if not table.num_rows:
        raise InputError(path, "has no results")
    return _shaped(pa.Table.from_pandas(order_run(table.to_pandas())), tables.RUN)


def write_trec_run(run: pd.DataFrame, path: str | Path, tag: str) -> None:
    """Write the run's results as a TREC run file in trec_eval order (placeholders skipped).

    Scores are written with full precision (repr), so reading the file back gives the same run.
    """
    if not tag or any(c.isspace() for c in tag):
        raise InputError(path, f"run tag {tag!r} must be one word", field="tag")
    hits = order_run(run[run["doc_id"].notna()])
    for column in ("query_id", "doc_id"):
        spaced = hits[column].astype(str).str.contains(r"\s", regex=True)
        if spaced.any():
            raise InputError(
                path,
                f"id {hits[column][spaced].iloc[0]!r} contains whitespace",
                field=column,
            )
    lines = (
        hits["query_id"].astype(str)
        + " Q0 "
        + hits["doc_id"].astype(str)
        + " "
        + hits["rank"].astype(str)
        + " "
        + hits["score"].map(repr)
        + f" {tag}\n"
    )
    Path(path).write_text("".join(lines), encoding="utf-8")
