"""On-disk embedding cache keyed by (model key, SHA-256 of the embedded text).

Layout: `<root>/<model slug>-<sha of model key>/shard-*.parquet`, each shard holding the
columns `key` (hex SHA-256 of the text) and `vector` (fixed-size float32 list). Shards are
append-only: a build writes new shards only for texts no shard holds, so a re-run writes
nothing and a changed chunking adds one small shard. Every shard is written to a temporary
file in the same directory and published with `os.replace`, so a reader (another process
included) sees a whole shard or none. Two processes embedding the same texts at once may both
write them; the duplicate keys are harmless (shards are read in name order, first wins).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SHARD_ROWS = 4096  # rows per shard: bounds the work lost if a long build is interrupted


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EmbedStats:
    """What one `embed` call did, for logs and Dagster metadata."""

    n: int  # texts asked for
    embedded: int  # computed by the model in this call
    cached: int  # read from the cache
    embed_seconds: float  # time spent in the model only
    seconds: float  # total, cache reads and writes included

    @property
    def docs_per_s(self) -> float:
        """Model throughput over the texts actually embedded (0 when nothing was)."""
        return self.embedded / self.embed_seconds if self.embedded and self.embed_seconds else 0.0

    def as_metadata(self) -> dict[str, float | int]:
        return dict(
            n_chunks=self.n,
            embedded=self.embedded,
            cached=self.cached,
            seconds=round(self.seconds, 3),
            docs_per_s=round(self.docs_per_s, 1),
        )


class EmbeddingCache:
    """The cached vectors of one model key (model id plus whatever changes its vectors)."""

    def __init__(self, root: Path, model_key: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_key)[:64]
        self.directory = Path(root) / f"{slug}-{text_key(model_key)[:12]}"
        self.model_key = model_key

    def _shards(self) -> list[Path]:
        return sorted(self.directory.glob("shard-*.parquet")) if self.directory.exists() else []

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vector of every key in `keys` that some shard holds."""
        wanted = set(keys)
        found: dict[str, np.ndarray] = {}
        for shard in self._shards():
            if len(found) == len(wanted):
                break
            shard_keys = pq.read_table(shard, columns=["key"]).column("key").to_pylist()
            rows = [i for i, k in enumerate(shard_keys) if k in wanted and k not in found]
            if not rows:
                continue
            vectors = _matrix(pq.read_table(shard, columns=["vector"]).column("vector"))
            for i in rows:
                found[shard_keys[i]] = vectors[i]
        return found

    def put(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Publish one new shard atomically (temp file in the same directory, then rename)."""
        if not len(keys):
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])
        table = pa.table({"key": pa.array(list(keys), pa.string()), "vector": column})
        self.directory.mkdir(parents=True, exist_ok=True)
        # Time first so shards sort in write order; uuid so concurrent writers never collide.
        name = f"shard-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".parquet")
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, self.directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks()
    return array.flatten().to_numpy().reshape(len(array), array.type.list_size)


def embed(
    texts: Sequence[str],
    cache: EmbeddingCache,
    encode: Callable[[list[str]], np.ndarray],
) -> tuple[np.ndarray, EmbedStats]:
    """Vectors for `texts` (row i for text i): cached ones read, the rest encoded and stored.

    Identical texts are encoded once. New vectors are stored every `SHARD_ROWS` texts, so an
    interrupted build keeps what it had finished.
    """
    start = time.perf_counter()
    keys = [text_key(t) for t in texts]
    known = cache.get(keys)
    missing: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        if key not in known:
            missing.setdefault(key, text)
    embed_seconds = 0.0
    todo = list(missing.items())
    for offset in range(0, len(todo), SHARD_ROWS):
        batch = todo[offset : offset + SHARD_ROWS]
        t0 = time.perf_counter()
        vectors = np.asarray(encode([text for _, text in batch]), dtype=np.float32)
        embed_seconds += time.perf_counter() - t0
        cache.put([key for key, _ in batch], vectors)
        known.update(zip((key for key, _ in batch), vectors, strict=True))
    matrix = (
        np.stack([known[k] for k in keys]).astype(np.float32)
        if keys
        else np.zeros((0, 0), dtype=np.float32)
    )
    stats = EmbedStats(
        n=len(texts),
        embedded=len(todo),
        cached=len(texts) - sum(1 for k in keys if k in missing),
        embed_seconds=embed_seconds,
        seconds=time.perf_counter() - start,
    )
    return matrix, stats
