"""Chunk ids, `{doc_id}:chunk:{n}`: the one place their format is written and read. Apart from
`core.suites.chunking`, so that reading a run or qrels file (`rageval eval`) need not import the
suites' models to tell chunk ids from document ids."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_CHUNK_ID = re.compile(r"^(?P<doc>.+):chunk:(?P<index>\d+)$")


def chunk_id(doc_id: str, index: int) -> str:
    return f"{doc_id}:chunk:{index}"


def split_chunk_id(value: str) -> tuple[str, int] | None:
    """`(doc_id, n)` for a chunk id `doc_id:chunk:n`, None for anything else (a document id)."""
    found = _CHUNK_ID.match(value)
    return (found["doc"], int(found["index"])) if found else None


def is_chunk_id(ids: pd.Series) -> pd.Series:
    """Whether each id has the chunk-id form `doc_id:chunk:n`."""
    return ids.astype(str).str.match(_CHUNK_ID)


def source_ids(ids: pd.Series) -> pd.Series:
    """The document id of each chunk id; ids that are not chunk ids come back unchanged."""
    return ids.str.extract(_CHUNK_ID)["doc"].fillna(ids)
