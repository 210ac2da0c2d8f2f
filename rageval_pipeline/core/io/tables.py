"""Arrow schemas of the tables the pipeline passes between stages.

Every stage reads and writes these shapes; `conform` casts a DataFrame to one and fails with the
missing column's name, so a stage never silently writes a table of the wrong shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:  # (pandas is imported by whoever passes a DataFrame: see `formats`)
    import pandas as pd

CORPUS = pa.schema(
    [
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("url", pa.string()),
        ("metadata", pa.string()),  # JSON object as text: free-form per dataset
    ]
)

QUERIES = pa.schema(
    [
        ("query_id", pa.string()),
        ("text", pa.string()),
        ("intent", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.string()),
        ("query_type", pa.string()),
        ("metadata", pa.string()),
    ]
)

# `level` is "document" (judged ids are corpus doc ids) or "chunk" (judged ids are chunk ids of
# the suite's reference chunking); BEIR qrels are always document level.
QRELS = pa.schema(
    [
        ("split", pa.string()),
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("relevance", pa.int32()),
        ("level", pa.string()),
    ]
)

# Evidence spans: a judgment attached to an excerpt of a document's text rather than to a chunk
# id, so it survives re-chunking (docs/suite-format.md). Offsets are characters of the document
# text (`start` inclusive, `end` exclusive); `sha256` is the SHA-256 hex of text[start:end] in
# UTF-8, checked against the corpus to catch drift.
SPANS = pa.schema(
    [
        ("split", pa.string()),
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("relevance", pa.int32()),
        ("sha256", pa.string()),
        # The nugget's decisive part (core.suites.derived); the whole span when none is given.
        ("decisive_start", pa.int64()),
        ("decisive_end", pa.int64()),
    ]
)

CHUNKS = pa.schema(
    [
        ("chunk_id", pa.string()),  # "{doc_id}:chunk:{chunk_index}"
        ("doc_id", pa.string()),
        ("chunk_index", pa.int32()),
        ("title", pa.string()),
        ("url", pa.string()),
        ("text", pa.string()),
        ("content_hash", pa.string()),  # SHA-256 hex of `text`
        ("ingested_at", pa.string()),  # ISO-8601, UTC
        # The chunk's extent in its document's text: character offsets, end exclusive.
        ("start", pa.int64()),
        ("end", pa.int64()),
    ]
)

# A run: one row per retrieved unit. `doc_id` is the retrieved id (a chunk id for chunked
# systems), `source_id` the corpus document it came from. A query that returned nothing keeps
# one row with null doc_id/rank/score so that its latency is not lost.
RUN = pa.schema(
    [
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("source_id", pa.string()),
        ("rank", pa.int32()),
        ("score", pa.float64()),
        ("latency_ms", pa.float64()),
        # The baseline's configuration timed on the same query, interleaved with this system
        # (built-in systems; null elsewhere): latency compared on one machine under one load.
        ("baseline_latency_ms", pa.float64()),
    ]
)

# Columns a producer may leave out: `conform` fills them with nulls.
OPTIONAL = frozenset({"baseline_latency_ms"})


def conform(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """Cast `df` to `schema` (extra columns dropped, order fixed, OPTIONAL ones filled with
    nulls); raise naming a missing column."""
    absent = [n for n in schema.names if n not in df.columns and n in OPTIONAL]
    if absent:
        df = df.assign(**{n: None for n in absent})
    missing = [name for name in schema.names if name not in df.columns]
    if missing:
        raise ValueError(f"table is missing column(s) {missing}; expected {schema.names}")
    return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)


def empty(schema: pa.Schema) -> pd.DataFrame:
    """An empty DataFrame with the schema's columns and dtypes."""
    return schema.empty_table().to_pandas()
