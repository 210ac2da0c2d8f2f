"""Fast 64-bit fingerprints of id strings, so joins and duplicate checks run on integers.

The readers' and the measures engine's first speed trick (bench/README.md, "Fast paths in one
place"; the others are the thread splits named there): the libraries' ways to turn 5M Arrow
string ids into integers are an order of magnitude slower. Equal strings always get equal
fingerprints; the callers verify every match on the real strings and fall back to exact codes
on a collision, so results never depend on the hash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:  # (not at run time: see `formats`)
    import pandas as pd

_PAD_ROWS = 1 << 18  # ids padded at once (a few MB of temporary copy)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64 constants
_MUL2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_WEIGHTS = np.random.default_rng(20240601).integers(1, 2**63, 64, dtype=np.uint64) | 1
# _LOW_BYTES[n] keeps the first n bytes of a little-endian 8-byte word.
_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [2**64 - 1], dtype=np.uint64)


def arrow_strings(values: pd.Series | pa.Array | pa.ChunkedArray) -> pa.LargeStringArray:
    """`values` as one contiguous Arrow large_string array (zero-copy for Arrow-backed columns)."""
    arr = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values)
    if isinstance(arr, pa.ChunkedArray):  # (combining copies even a single chunk)
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr.cast(pa.large_string())


def _multipliers(count: int) -> np.ndarray:
    """Fixed odd 64-bit multipliers, one per 8-byte word position (ids up to 512 bytes share
    one table; longer ones draw more from the same seeded stream)."""
    if count <= len(_WEIGHTS):
        return _WEIGHTS[:count]
    return np.random.default_rng(20240601).integers(1, 2**63, count, dtype=np.uint64) | 1


_SaltFiller = Callable[[int, int, np.ndarray], object]


def _salt_filler(
    salt: np.ndarray | None, salt_index: np.ndarray | None, salt_starts: np.ndarray | None
) -> _SaltFiller | None:
    """A function writing the salt of rows start..stop into `out` (None: no salt)."""
    if salt is None:
        return None
    if salt_index is not None:
        return lambda start, stop, out: np.take(salt, salt_index[start:stop], out=out)
    if salt_starts is None:
        return lambda start, stop, out: np.copyto(out, salt[start:stop], casting="unsafe")

    def blocks(start: int, stop: int, out: np.ndarray) -> None:
        first = int(np.searchsorted(salt_starts, start, side="right")) - 1
        last = int(np.searchsorted(salt_starts, stop, side="left"))
        edges = np.r_[start, salt_starts[first + 1 : last], stop]
        out[:] = np.repeat(salt[first:last], np.diff(edges))

    return blocks


def fingerprint(
    values: pa.LargeStringArray,
    salt: np.ndarray | None = None,
    salt_index: np.ndarray | None = None,
    salt_starts: np.ndarray | None = None,
) -> np.ndarray:
    """A uint64 per string; equal (string, salt) pairs give equal values. Row i's salt is
    `salt[i]`; with `salt_index`, `salt[salt_index[i]]`; with `salt_starts` (ascending, from
    0), `salt[j]` for the block of rows from `salt_starts[j]` to the next start. The last two
    keep a per-query salt a per-query table, never spread over every row.

    Why not a library's: on 5M ids of the metrics bench (`doc<n>`, 1M distinct), side by side in
    one process (2026-11-26, load 4-5; best of 3): this 0.16 s, DuckDB's `hash()` over the same
    Arrow column 0.42 s (and its import), `pyarrow.compute.dictionary_encode` 2.33 s,
    `pandas.factorize` 3.4 s, `pandas.util.hash_array` 5.5 s (both through Python strings).

    The salt (e.g. each row's query id fingerprint) is mixed in, so one pass keys (query, doc)
    pairs. Each id is read as 8-byte words, zero-filled after its end, so its value depends on
    its own bytes only: Σ word_j · M_j + length · G (mod 2^64), then a splitmix64 finaliser.
    Nulls hash like "".
    """
    fill = _salt_filler(salt, salt_index, salt_starts)
    n = len(values)
    h = np.empty(n, dtype=np.uint64)
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64)[values.offset : values.offset + n + 1]
    # Everything runs a slice of _PAD_ROWS ids at a time, in place in `h`: temporaries stay a
    # few MB (fresh 8-byte-per-id arrays would cost more, in memory and page faults, than the
    # arithmetic itself).
    slices = [(start, min(start + _PAD_ROWS, n)) for start in range(0, n, _PAD_ROWS)]
    longest = max((int(np.diff(offsets[a : b + 1]).max()) for a, b in slices), default=0)
    width = -(-longest // 8) * 8
    weights = _multipliers(width // 8)
    # Ids of similar length: Arrow pads them to one width, giving a (rows, width/8) matrix.
    padded = bool(n) and not values.null_count
    padded = padded and n * width <= 2 * int(offsets[-1] - offsets[0]) + 8 * n
    if not padded:
        raw = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        buffer = np.zeros(len(raw) + longest + 8, np.uint8)
        buffer[: len(raw)] = raw
        # Unaligned 8-byte words starting at every byte: one gather reads 8 bytes of each id.
        words = np.ndarray(shape=(len(raw) + longest,), dtype="<u8", buffer=buffer, strides=(1,))
    for start, stop in slices:
        part, lengths = h[start:stop], np.diff(offsets[start : stop + 1])
        scratch = np.empty_like(part)
        part[:] = lengths
        part *= _GOLDEN
        if fill is not None:
            fill(start, stop, scratch)
            scratch *= _MUL2
            part += scratch
        if padded:
            rows = stop - start
            text = pc.ascii_rpad(values.slice(start, rows), width=width, padding="\0")
            matrix = np.frombuffer(text.buffers()[2], np.uint64, count=rows * width // 8)
            for column, weight in zip(matrix.reshape(rows, width // 8).T, weights, strict=True):
                np.multiply(column, weight, out=scratch)
                part += scratch
        else:
            for j, weight in zip(range(0, longest, 8), weights, strict=True):
                word = words[offsets[start:stop] + j] & _LOW_BYTES[np.clip(lengths - j, 0, 8)]
                part += word * weight
        for shift, multiplier in ((30, _MUL1), (27, _MUL2), (31, None)):
            np.right_shift(part, np.uint64(shift), out=scratch)
            part ^= scratch
            if multiplier is not None:
                part *= multiplier
    return h


def id_block_starts(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The first row of each run of equal adjacent ids (a null equals nothing): the blocks of a
    table grouped by query."""
    n = len(ids)
    if not n:
        return np.zeros(0, np.int64)
    change = pc.not_equal(ids.slice(1), ids.slice(0, n - 1))
    if change.null_count:  # (only then: a fill is a pass, and its scalar imports pandas)
        change = pc.fill_null(change, True)
    return np.flatnonzero(np.r_[True, change.to_numpy(zero_copy_only=False)])


def whole_query_pieces(query: pa.LargeStringArray, starts: np.ndarray, count: int) -> np.ndarray:
    """Row edges cutting a run into about `count` pieces of whole queries (the blocks of equal
    adjacent `query` ids, from their `id_block_starts`), so a repeated pair lies within one
    piece; one piece when a query's rows are not together (a repeat may span blocks)."""
    n = len(query)
    if len(starts) < 2 or pc.count_distinct(query.take(pa.array(starts))).as_py() < len(starts):
        return np.array([0, n])
    at = np.searchsorted(starts, np.linspace(0, n, count + 1)[1:-1])
    inner = starts[np.minimum(at, len(starts) - 1)]
    return np.unique(np.r_[0, inner, n])


def pair_keys(
    query: pa.LargeStringArray,
    doc: pa.LargeStringArray,
    query_index: np.ndarray | None = None,
    starts: np.ndarray | None = None,
) -> np.ndarray:
    """A uint64 per (query id, doc id) row; equal pairs get equal keys. With `query_index`,
    `query` holds each distinct id once and row i's is `query[query_index[i]]`; `starts`:
    `id_block_starts(query)`, when the caller has them (a run's reader also orders by them)."""
    if query_index is not None:
        return fingerprint(doc, fingerprint(query), query_index)
    # Each row's salt is its query id's fingerprint, a function of the id alone, so keys made
    # by a reader and by the measures engine agree. Rows grouped by query hash one id a block.
    if not len(query):
        return np.zeros(0, np.uint64)
    starts = id_block_starts(query) if starts is None else starts
    if len(starts) * 16 > len(query):  # not grouped: hashing every id costs less
        return fingerprint(doc, fingerprint(query))
    return fingerprint(doc, fingerprint(query.take(pa.array(starts))), salt_starts=starts)


def shared_keys(keys: np.ndarray) -> np.ndarray:
    """The rows whose key another row also has, ascending (one sort)."""
    ordered = np.sort(keys)
    same = ordered[1:] == ordered[:-1]
    if not same.any():
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.isin(keys, ordered[1:][same]))


def exact_pair_keys(query_index: np.ndarray, doc_codes: np.ndarray) -> np.ndarray:
    """One uint64 per (query, doc) from exact codes below 2**32: injective, unlike a hash."""
    return (query_index.astype(np.uint64) << np.uint64(32)) | doc_codes.astype(np.uint64)
