"""Content-addressed shards of a chunked corpus: what several workers embed at once.

A chunk goes to bucket `int(sha256(doc_id)[:8], 16) % count`, by its document: a document's
chunks stay together, so a new (or edited) document changes one shard whatever the chunking,
and every other shard keeps its members and its id (by chunk text, a document of k chunks would
touch up to k shards). A shard's id is the digest of its members' sorted text keys, the keys
their vectors are cached under: the same texts name the same shard however the corpus arrived.
Empty buckets are no shards.

`embeddings.embed` makes a text's vector depend on the text alone, so shards embedded in any
order, on any machines, merge into exactly the index one call would build; the bucket count
changes how work is split, never a vector.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval.dense import passage_texts
from rageval_pipeline.core.retrieval.embeddings import text_key

MAX_SHARDS = 4096


@dataclass(frozen=True)
class Shard:
    """One bucket's share of the chunks, small enough to pass between steps."""

    number: int  # the bucket, 0 <= number < count
    count: int  # how many buckets the corpus was split into
    id: str  # digest of the members' sorted text keys
    chunks: int  # rows of the chunk table in it
    texts: int  # distinct texts among them (what is embedded)

    @property
    def label(self) -> str:
        return f"shard {self.number + 1}/{self.count} ({self.id[:12]})"


def buckets(doc_ids: pd.Series, count: int) -> np.ndarray:
    """The bucket of each document id: the first 32 bits of its SHA-256, modulo `count`."""
    if not 1 <= count <= MAX_SHARDS:
        raise InputError(None, f"shards must be 1 to {MAX_SHARDS} (got {count})", field="shards")
    digests = (hashlib.sha256(str(d).encode("utf-8")).hexdigest()[:8] for d in doc_ids)
    return np.fromiter((int(h, 16) % count for h in digests), dtype=np.int64, count=len(doc_ids))


def _shard(number: int, count: int, members: pd.DataFrame) -> Shard:
    keys = sorted({text_key(t) for t in passage_texts(members)})
    digest = hashlib.sha256("\n".join(keys).encode("ascii")).hexdigest()
    return Shard(number, count, digest, len(members), len(keys))


def split(chunks: pd.DataFrame, count: int) -> list[Shard]:
    """The non-empty shards of `chunks` over `count` buckets, by bucket number."""
    numbers = buckets(chunks["doc_id"], count)
    return [_shard(int(n), count, chunks[numbers == n]) for n in np.unique(numbers)]


def members(chunks: pd.DataFrame, shard: Shard) -> pd.DataFrame:
    """The rows of `chunks` in `shard`; refused when they are no longer the texts the shard
    was split from (the chunks were rebuilt in between)."""
    rows = chunks[buckets(chunks["doc_id"], shard.count) == shard.number]
    if _shard(shard.number, shard.count, rows).id != shard.id:
        raise InputError(
            None,
            f"{shard.label}: the chunks changed since they were split; run the index again",
            field="chunks",
        )
    return rows
