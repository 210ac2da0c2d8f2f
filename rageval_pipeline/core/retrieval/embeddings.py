"""On-disk embedding cache keyed by (model key, SHA-256 of the embedded text).

A text's vector depends on the text alone, not on what else is embedded with it: texts are
encoded in batches of one length (as the model counts it: tokens after truncation), so no
batch is ever padded, and the transformer's arithmetic on a text is the same whatever its
batch partners and batch size (padding to a longer partner moved vectors by ~1e-7). So a corpus
embedded in shards, in any order, on any number of machines, gives exactly the vectors of one
call, and cached vectors are valid for any sharding. Texts go longest first, ties by key, so
batches do not depend on the caller's order; vectors come back in the caller's order.

Layout: `<root>/<model slug>-<sha of model key>/shard-*.parquet`, each shard holding the
columns `key` (hex SHA-256 of the text) and `vector` (fixed-size float32 list). Shards are
append-only: a build writes new shards only for texts no shard holds, so a re-run writes
nothing and a changed chunking adds one small shard. Every shard is written atomically (a
temporary file renamed, or on object storage one PUT: core.storage.location), so a reader
(another process included) sees a whole shard or none; shards are immutable, so writers need
no lock. Two processes embedding the same texts at once may both write them; the duplicate
keys are harmless (shards are read in name order, first wins).
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from rageval_pipeline.core.retrieval import embedding_cost
from rageval_pipeline.core.retrieval.embedding_cost import Cost, Fit, Plan, Recorded, runs
from rageval_pipeline.core.storage.files import write_parquet
from rageval_pipeline.core.storage.location import as_location, read_parquet

SHARD_ROWS = 4096  # rows per shard: bounds the work lost if a long build is interrupted
# Texts per model call when the caller sets none (dense passes its batch size): progress is
# reported between calls, and 64 of nfcorpus' longest texts take ~20 s on two busy cores.
ENCODE_ROWS = 64
# Model calls timed to measure what an embedding will cost (`calibrate`), after one that pays
# the model's warm-up: spread over the texts' lengths, so the fit sees small and large calls.
# Under load a call's time varies 10x from one to the next: on 347 calls timed at load 5
# (bench/README.md), 20 spread calls put the total within 14% (median; 26% at the 90th
# percentile), 10 calls within 17% (54%).
CALIBRATION_CALLS = 20
PROGRESS_EVERY_S = 30.0
# A line also every tenth of the texts, but not within PROGRESS_GAP_S of the last: an
# embedding of 10-20 s (a quiet machine, a small folder) says where it is, a long one every 30 s.
PROGRESS_STEP = 0.1
PROGRESS_GAP_S = 2.0
# A time left under this is printed as "under 5 s": a few calls are left, and under load one
# call's time varies 10x, so a figure would only look precise.
ETA_FLOOR_S = 5.0


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


@dataclass(frozen=True)
class Progress:
    """How far one `embed` call's model work has got."""

    done: int  # texts embedded so far
    total: int  # texts to embed in this call (cached ones excluded)
    seconds: float  # model and cache-write time so far
    eta_seconds: float | None  # None until something is done

    @property
    def docs_per_s(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    def __str__(self) -> str:
        if self.eta_seconds is None:
            eta = "?"
        elif self.done < self.total and self.eta_seconds < ETA_FLOOR_S:
            eta = f"under {ETA_FLOOR_S:.0f} s"
        else:
            eta = f"{self.eta_seconds:.0f} s"
        percent = 100 * self.done / self.total if self.total else 100.0
        return (
            f"embedded {self.done:,}/{self.total:,} ({percent:.0f}%), "
            f"{self.docs_per_s:.1f} docs/s, ETA {eta}"
        )


class EmbeddingCache:
    """The cached vectors of one model key (model id plus whatever changes its vectors)."""

    def __init__(self, root: Path, model_key: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_key)[:64]
        self.directory = as_location(root) / f"{slug}-{text_key(model_key)[:12]}"
        self.model_key = model_key

    def _shards(self) -> list[Path]:
        if not self.directory.exists():
            return []
        return sorted(self.directory.glob("shard-*.parquet"), key=lambda shard: shard.name)

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vector of every key in `keys` that some shard holds."""
        wanted = set(keys)
        found: dict[str, np.ndarray] = {}
        for shard in self._shards():
            if len(found) == len(wanted):
                break
            shard_keys = read_parquet(shard, columns=["key"]).column("key").to_pylist()
            rows = [i for i, k in enumerate(shard_keys) if k in wanted and k not in found]
            if not rows:
                continue
            vectors = _matrix(read_parquet(shard, columns=["vector"]).column("vector"))
            for i in rows:
                found[shard_keys[i]] = vectors[i]
        return found

    def cost(self) -> Recorded | None:
        """The cost this cache's last embedding fitted (`embedding_cost.read`)."""
        return embedding_cost.read(self.directory)

    def put(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Publish one new shard atomically (core.storage.files.write_parquet)."""
        if not len(keys):
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])
        table = pa.table({"key": pa.array(list(keys), pa.string()), "vector": column})
        # Time first so shards sort in write order; uuid so concurrent writers never collide.
        write_parquet(
            table, self.directory / f"shard-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        )


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks()
    return array.flatten().to_numpy().reshape(len(array), array.type.list_size)


def characters(texts: list[str]) -> list[int]:
    """The default length of a text for batching: its characters (an encoder whose vectors
    depend on padding passes its own, e.g. tokens after truncation)."""
    return [len(t) for t in texts]


def embed(
    texts: Sequence[str],
    cache: EmbeddingCache,
    encode: Callable[[list[str]], np.ndarray],
    *,
    lengths: Callable[[list[str]], Sequence[int]] = characters,
    progress: Callable[[Progress], None] | None = None,
    progress_every_s: float | None = None,
    rows_per_call: int | None = None,
) -> tuple[np.ndarray, EmbedStats]:
    """Vectors for `texts` (row i for text i): cached ones read, the rest encoded and stored.

    Identical texts are encoded once. `encode` gets texts of one length (by `lengths`) at a
    time, at most `rows_per_call` (default `ENCODE_ROWS`) of them, longest first. New vectors
    are stored every `SHARD_ROWS` texts, so an interrupted build keeps what it had finished.
    `progress` is called at the start, then at least every `progress_every_s` (default
    `PROGRESS_EVERY_S`) unless one model call takes longer, and every `PROGRESS_STEP` of the
    texts but not within `PROGRESS_GAP_S` of the last, and at the end. The cost fitted
    on the calls is recorded beside the cache (`embedding_cost`) for the next estimate.
    """
    start = time.perf_counter()
    rows_per_call = rows_per_call or ENCODE_ROWS
    every_s = PROGRESS_EVERY_S if progress_every_s is None else progress_every_s
    keys = [text_key(t) for t in texts]
    known = cache.get(keys)
    missing = _missing(keys, texts, known)
    todo = _longest_first(missing, lengths)
    calls = []  # each shard's model calls (first, end): runs of one length
    for offset in range(0, len(todo), SHARD_ROWS):
        sizes = [size for _, _, size in todo[offset : offset + SHARD_ROWS]]
        calls.append([(offset + a, offset + b) for a, b in runs(sizes, rows_per_call)])
    plan = [(end - first, todo[first][2]) for shard in calls for first, end in shard]
    prior = cache.cost() if todo else None
    tracker = _Tracker(plan, progress, every_s, prior and prior.cost)
    embed_seconds = 0.0
    for offset, shard_calls in zip(range(0, len(todo), SHARD_ROWS), calls, strict=True):
        shard, parts = todo[offset : offset + SHARD_ROWS], []
        for first, end in shard_calls:
            batch = [text for _, text, _ in todo[first:end]]
            t0 = time.perf_counter()
            parts.append(np.asarray(encode(batch), dtype=np.float32))
            embed_seconds += time.perf_counter() - t0
            tracker.advance(last=end == len(todo))
        vectors = np.concatenate(parts)
        cache.put([key for key, _, _ in shard], vectors)
        known.update(zip((key for key, _, _ in shard), vectors, strict=True))
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
    # Recorded from as many calls as a calibration times, or more, of different sizes.
    if tracker.fit.calls > CALIBRATION_CALLS and tracker.fit.costs(recent=False)[2]:
        embedding_cost.record(cache.directory, _fitted(tracker.fit, todo))
    return matrix, stats


@dataclass(frozen=True)
class Calibration:
    """What `calibrate` measured: the cost fitted on a sample of the texts' model calls (None
    when fewer than two were timed: then nothing is left), the seconds the sample took (model
    and cache), how many texts it embedded (their vectors cached), and the length of each text
    still to embed (by key)."""

    cost: Cost | None
    seconds: float
    embedded: int
    lengths: dict[str, int]


def calibrate(
    texts: Sequence[str],
    cache: EmbeddingCache,
    encode: Callable[[list[str]], np.ndarray],
    *,
    lengths: Callable[[list[str]], Sequence[int]] = characters,
    rows_per_call: int | None = None,
    calls: int = CALIBRATION_CALLS,
) -> Calibration:
    """Time `calls` of the model calls `embed` would make for `texts` (spread over the plan
    from the longest texts to the shortest), after one of the shortest that pays the warm-up;
    fit their cost (or, when one is recorded here, scale it to the speed they ran at: its
    shape comes from many more calls), record it beside the cache and keep their vectors (an
    embedding of these texts afterwards computes only the rest)."""
    start = time.perf_counter()
    keys = [text_key(t) for t in texts]
    todo = _longest_first(_missing(keys, texts, cache.get(keys)), lengths)
    spans = list(runs([size for _, _, size in todo], rows_per_call or ENCODE_ROWS))
    recorded = cache.cost() if todo else None
    fit, done, parts = Fit(recorded and recorded.cost), [], []
    for i in _spread(len(spans), calls):
        first, end = spans[i]
        t0 = time.perf_counter()
        parts.append(np.asarray(encode([text for _, text, _ in todo[first:end]]), np.float32))
        fit.add(end - first, todo[first][2], time.perf_counter() - t0)
        done += [key for key, _, _ in todo[first:end]]
    if done:
        cache.put(done, np.concatenate(parts))
    cost = None
    if fit.calls > 1:
        cost = fit.scaled(recent=False) or _fitted(fit, todo)
        if fit.prior is not None or fit.costs(recent=False)[2]:  # else: one size timed
            embedding_cost.record(cache.directory, cost)
    finished = set(done)
    left = {key: size for key, _, size in todo if key not in finished}
    return Calibration(cost, time.perf_counter() - start, len(done), left)


def _spread(n: int, calls: int) -> list[int]:
    """Which of `n` calls (longest texts first) to time: the last (short: a cheap warm-up),
    then `calls` spread evenly over the rest."""
    if n <= calls + 1:
        return [n - 1, *range(n - 1)] if n else []
    chosen = np.unique(np.round(np.linspace(0, n - 2, calls)).astype(int))
    return [n - 1, *chosen.tolist()]


def _fitted(fit: Fit, todo: list[tuple[str, str, int]]) -> Cost:
    """The cost fitted on every call alike, with the texts' tokens a character."""
    fixed, per_token, _ = fit.costs(recent=False)
    characters_ = sum(len(text) for _, text, _ in todo)
    per_char = sum(size for _, _, size in todo) / characters_ if characters_ else 1.0
    return Cost(fixed_s=fixed, per_token_s=per_token, tokens_per_char=max(per_char, 1e-6))


def _missing(keys: list[str], texts: Sequence[str], known: dict) -> dict[str, str]:
    """key -> text of each distinct text not in `known`."""
    missing: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        if key not in known:
            missing.setdefault(key, text)
    return missing


def _longest_first(
    missing: dict[str, str], lengths: Callable[[list[str]], Sequence[int]]
) -> list[tuple[str, str, int]]:
    """(key, text, length) of each text to embed, longest first, ties by key: the order (and
    so each batch) depends on the set of texts only. Lengths are asked `SHARD_ROWS` texts at a
    time, which bounds the tokenizer's memory on a large shard."""
    items = list(missing.items())
    sizes = [
        int(size)
        for i in range(0, len(items), SHARD_ROWS)
        for size in lengths([text for _, text in items[i : i + SHARD_ROWS]])
    ]
    rows = [(key, text, size) for (key, text), size in zip(items, sizes, strict=True)]
    return sorted(rows, key=lambda row: (-row[2], row[0]))


class _Tracker:
    """Reports progress at the start, before the interval would run out, every step of the
    texts (not within the gap of the last report), and at the end.

    Reports can only come between model calls, so one is made when the next call, taking as
    long as the last, would end past the interval. The ETA is the calls left timed by a cost
    measured on this machine (`embedding_cost.Fit`: fixed plus per token, the latest calls
    weighing most, the warm-up call left out): the cost recorded here (`prior`: a
    calibration just before, or the last embedding) scaled to the speed of the calls so far,
    else the cost fitted on them.
    Texts go longest first in batches of one length, so neither texts nor characters left
    measure the work left: short texts come in many small calls, where the fixed cost is most
    of the time.
    """

    def __init__(
        self,
        plan: Plan,
        report: Callable[[Progress], None] | None,
        every_s: float,
        prior: Cost | None = None,
        clock: Callable[[], float] | None = None,  # a replay passes its calls' own
    ) -> None:
        self.report, self.every_s = report, every_s
        self.clock = clock or time.perf_counter
        self.plan = plan  # (rows, tokens a row) of every model call, in order
        self.total = sum(rows for rows, _ in plan)
        self.calls = self.done = self.reported = 0
        self.gap = min(PROGRESS_GAP_S, every_s)
        self.fit = Fit(prior)
        self.start = self.last = self.call_start = self.clock()
        if report is not None and plan:
            report(Progress(0, self.total, 0.0, None))

    def advance(self, *, last: bool) -> None:
        rows, size = self.plan[self.calls]
        self.calls += 1
        self.done += rows
        now = self.clock()
        call_s, self.call_start = now - self.call_start, now
        self.fit.add(rows, size, call_s)
        stepped = self.done - self.reported >= PROGRESS_STEP * self.total
        due = now - self.last + call_s >= self.every_s or (stepped and now - self.last >= self.gap)
        if self.report is None or not (last or due):
            return
        self.last, self.reported = now, self.done
        self.report(Progress(self.done, self.total, now - self.start, self.eta()))

    def eta(self) -> float:
        """Seconds the calls left should take at the recorded cost scaled to the speed now,
        else at the cost fitted on the calls so far."""
        if (cost := self.fit.scaled()) is None:
            fixed, per_token, _ = self.fit.costs()
            cost = Cost(fixed_s=fixed, per_token_s=per_token, tokens_per_char=1.0)
        return cost.seconds(self.plan[self.calls :])
