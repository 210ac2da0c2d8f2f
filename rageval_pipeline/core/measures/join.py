"""Finding the judged documents of a run: a join of (query, doc) keys with the qrels.

Keys are 64-bit fingerprints (core.io.keys), checked on the real ids afterwards; a
collision, or a repeated (query, doc) pair, reruns the join on exact integer codes.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.keys import (
    arrow_strings,
    exact_pair_keys,
    pair_keys,
    shared_keys,
)

if TYPE_CHECKING:  # imported where used: `rageval eval`'s Arrow path loads no pandas
    import pandas as pd

# Run rows probed against the judgments' bitmap at a time (8-byte temporaries of 512 kB each,
# which stay in cache: 2x faster on 5M rows than slices 8 times as long).
_PROBE_ROWS = 1 << 16


@dataclass
class OrderedRun:
    """The retrieved rows in trec_eval order, in query-index space."""

    qidx: np.ndarray  # query index of each row (rows of one query are contiguous)
    source_rows: np.ndarray  # row of the caller's table each ordered row came from
    start: np.ndarray  # first row of each query (meaningless where n_ret is 0)
    n_ret: np.ndarray  # rows per query
    # The doc ids stay in the caller's order (moving millions of strings costs more than
    # moving their integer keys); `doc_order[i]` is the position of ordered row i among them.
    docs: pa.LargeStringArray
    doc_qidx: np.ndarray  # query index of each of `docs`
    doc_order: np.ndarray | None  # None: already in order
    keys: np.ndarray | None  # a reader's `keys.pair_keys` of the rows; None: made by the join
    unique_keys: bool  # a reader found no pair repeated in `keys`: no duplicate check needed

    def doc_ids(self, rows: np.ndarray) -> pa.LargeStringArray:
        """The doc ids of the given ordered rows."""
        return self.docs.take(pa.array(rows if self.doc_order is None else self.doc_order[rows]))

    def in_order(self, per_doc: np.ndarray) -> np.ndarray:
        """An array aligned with `docs`, put in row order."""
        return per_doc if self.doc_order is None else per_doc[self.doc_order]


@dataclass(frozen=True)
class Judgments:
    """The qrels' side of the join, made from the qrels alone, so a caller can make it while
    the run is still being read (`Judgments.of`): each judgment's (query id, doc id) key,
    the keys sorted, and a bitmap of their low bits that rejects most unjudged run rows before
    a binary search. Keys are fingerprints of the ids, not of any query index."""

    keys: np.ndarray
    order: np.ndarray  # the judgments by key
    sorted_keys: np.ndarray
    bitmap: np.ndarray  # bit b of byte i: some key's low `bits` bits are 8i + b
    bits: int
    clash: bool  # two judgments share a key: a fingerprint collision (a repeat is an error)

    @classmethod
    def of(cls, qrels: pd.DataFrame | pa.Table, keys: np.ndarray | None = None) -> Judgments:
        """The judgments of a qrels table (query_id, doc_id; pandas or Arrow); InputError when
        one repeats. `keys`: the `keys.pair_keys` of its rows, all distinct, when its reader
        made them (`formats.read_keyed_qrels`)."""
        if keys is not None:
            return cls.indexed(keys, False)
        query, docs = arrow_strings(qrels["query_id"]), arrow_strings(qrels["doc_id"])
        return cls.checked(
            pair_keys(query, docs),
            lambda rows: query.take(pa.array(rows)),
            lambda rows: docs.take(pa.array(rows)),
        )

    @classmethod
    def checked(
        cls,
        keys: np.ndarray,
        query: Callable[[np.ndarray], object],
        doc: Callable[[np.ndarray], object],
    ) -> Judgments:
        """The judgments with these keys (`query`, `doc`: the ids of given rows), or
        InputError naming the first that repeats."""
        clash, repeat = _first_duplicate(keys, query, doc)
        if repeat is not None:
            at = np.array([repeat])
            raise InputError(
                None,
                f"qrels judge doc {str(_numpy(doc(at))[0])!r} for query "
                f"{str(_numpy(query(at))[0])!r} more than once",
                field="doc_id",
            )
        return cls.indexed(keys, clash)

    @classmethod
    def indexed(cls, keys: np.ndarray, clash: bool) -> Judgments:
        """These judgments' keys sorted and mapped (`clash`: whether two of them are equal)."""
        order = np.argsort(keys)
        sorted_keys = keys[order]
        # One bit a key keeps the bitmap (2 MB at most) in cache, which a byte a key (8 MB)
        # was not: 3x faster.
        bits = int(np.clip(np.ceil(np.log2(max(len(keys), 1))) + 5, 10, 24))
        seen = np.zeros(1 << bits, dtype=bool)
        seen[sorted_keys & np.uint64((1 << bits) - 1)] = True
        bitmap = np.packbits(seen, bitorder="little")
        return cls(keys, order, sorted_keys, bitmap, bits, clash)


def _first_duplicate(
    keys: np.ndarray, query: Callable[[np.ndarray], object], doc: Callable[[np.ndarray], object]
) -> tuple[bool, int | None]:
    """(any equal keys?, first row whose (query, doc) really repeats an earlier row);
    `query`, `doc`: the ids (or codes) of given rows."""
    rows = shared_keys(keys)
    if not rows.size:
        return False, None
    import pandas as pd

    frame = pd.DataFrame({"q": _numpy(query(rows)), "doc": _numpy(doc(rows))})
    repeats = rows[frame.duplicated().to_numpy()]
    return True, (int(repeats[0]) if repeats.size else None)


def _numpy(values: object) -> np.ndarray:
    """Arrow or numpy values as numpy, for pandas to compare."""
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values.to_numpy(zero_copy_only=False)
    return np.asarray(values)


def join(
    run: OrderedRun,
    j_q: np.ndarray,
    j_docs: pa.LargeStringArray,
    universe: np.ndarray,
    distinct: pa.LargeStringArray,
    judgments: Judgments | None,
) -> tuple[np.ndarray, np.ndarray, Judgments]:
    """(run row, judgment row) of every retrieved judged document, and the qrels' side of the
    join; also rejects duplicates.

    `j_q` and `run.doc_qidx` index `universe` (the query ids; `distinct` as Arrow strings);
    `judgments`: the qrels' (`Judgments.of`), or None to make them here, after the run's
    duplicate check (its sort is the peak of memory; they are not held through it).
    """
    run_keys = run.keys  # (a reader's, in row order already)
    if run_keys is None:  # (made here, not kept on the run: one 8-byte column less at peak)
        run_keys = run.in_order(pair_keys(distinct, run.docs, run.doc_qidx))
    clash = False
    if not run.unique_keys:
        clash = _no_repeat(run, run_keys, universe)
    if judgments is None:
        judgments = Judgments.checked(
            pair_keys(distinct, j_docs, j_q),
            lambda rows: universe[j_q[rows]],
            lambda rows: j_docs.take(pa.array(rows)),
        )
    if not (clash or judgments.clash):

        def same_ids(run_rows: np.ndarray, j_rows: np.ndarray) -> bool:
            """Whether the matched rows' query and doc ids are equal, not only their keys."""
            same_query = np.array_equal(run.qidx[run_rows], j_q[j_rows])
            equal = pc.equal(run.doc_ids(run_rows), j_docs.take(pa.array(j_rows)))
            return same_query and pc.all(equal).as_py() in (True, None)

        run_rows, j_rows, same = _matches(run_keys, judgments, same_ids)
        if same:
            return run_rows, j_rows, judgments
    # Fingerprints collided: exact integer codes for the ids, and the join again.
    import pandas as pd

    codes, _ = pd.factorize(
        np.concatenate(
            [run.docs.to_numpy(zero_copy_only=False), j_docs.to_numpy(zero_copy_only=False)]
        )
    )
    run_keys = run.in_order(exact_pair_keys(run.doc_qidx, codes[: len(run.docs)]))
    _no_repeat(run, run_keys, universe)
    exact = Judgments.indexed(exact_pair_keys(j_q, codes[len(run.docs) :]), False)
    return *_matches(run_keys, exact)[:2], judgments


def _no_repeat(run: OrderedRun, keys: np.ndarray, universe: np.ndarray) -> bool:
    """Whether any keys of the run are equal; InputError when a (query, doc) really repeats."""
    clash, repeat = _first_duplicate(keys, lambda rows: run.qidx[rows], run.doc_ids)
    if repeat is not None:
        doc = run.doc_ids(np.array([repeat]))[0].as_py()
        raise InputError(
            None,
            f"query {universe[run.qidx[repeat]]!r} retrieves doc {doc!r} more than once",
            field="doc_id",
        )
    return clash


def _matches(
    run_keys: np.ndarray,
    judgments: Judgments,
    check: Callable[[np.ndarray, np.ndarray], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(run row, judgment row) of the run keys found among the judgments' (unique) keys, and
    whether `check` holds for every pair of rows (True without one).

    Named fast path: the two halves of the run are probed and checked in two threads (numpy
    and Arrow release the GIL), as scoring otherwise leaves the second core idle. On the
    bench's 50,000 x 100 run against 1.5M judgments (bench/README.md, "Fast paths in one
    place"; quiet, best of 5 in one process): 0.071 s against 0.134 s probed by one thread."""
    if not len(judgments.keys) or not len(run_keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), True

    def half(start: int, stop: int) -> tuple[np.ndarray, np.ndarray, bool]:
        run_rows, j_rows = _probed(run_keys[start:stop], judgments, start)
        return run_rows, j_rows, check is None or check(run_rows, j_rows)

    middle = len(run_keys) // 2
    if middle < _PROBE_ROWS:
        return half(0, len(run_keys))
    with ThreadPoolExecutor(max_workers=1) as pool:
        second = pool.submit(half, middle, len(run_keys))
        first = half(0, middle)
        second = second.result()
    rows = (np.concatenate([a, b]) for a, b in zip(first[:2], second[:2], strict=True))
    return *rows, first[2] and second[2]


def _probed(
    run_keys: np.ndarray, judgments: Judgments, offset: int
) -> tuple[np.ndarray, np.ndarray]:
    """`_matches` of these run keys, rows counted from `offset`."""
    # Probed as int64, numpy's index type: uint64 indexes would be copied to int64 first.
    signed, mask = run_keys.view(np.int64), (1 << judgments.bits) - 1
    parts = []
    for start in range(0, len(run_keys), _PROBE_ROWS):
        low = signed[start : start + _PROBE_ROWS] & mask
        byte = np.take(judgments.bitmap, low >> 3)
        low &= 7
        hit = byte >> low.astype(np.uint8)
        parts.append(np.flatnonzero(hit & np.uint8(1)) + start)
    candidates = np.concatenate(parts)  # ascending rows
    # Probing in key order keeps the binary searches in cache; the results go back to row
    # order by the same permutation (no second sort).
    keys = run_keys[candidates]
    by_key = np.argsort(keys)
    at = np.empty_like(by_key)
    at[by_key] = np.searchsorted(judgments.sorted_keys, keys[by_key])
    np.minimum(at, len(judgments.sorted_keys) - 1, out=at)
    found = judgments.sorted_keys[at] == keys
    return candidates[found] + offset, judgments.order[at[found]]
