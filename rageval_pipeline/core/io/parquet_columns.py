"""A Parquet file's columns, checked as the text readers check theirs (`formats` reads runs and
qrels with these): the expected schema, casts only where they lose nothing, nulls, non-finite
numbers and repeated pairs located by row, text validated as UTF-8.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.delimited import first_repeat
from rageval_pipeline.core.io.field_checks import INT32, quote_repr

_PANDAS_INDEX = re.compile(r"__index_level_\d+__")
_EXACT_FLOAT_INT = 2**53  # integers a float64 holds exactly


def read_checked(
    path: Path,
    data: bytes,
    spec: tuple[dict, dict],
    accepted: str,
    types: dict[str, pa.DataType] | None = None,
) -> pa.Table:
    """The file's columns of `spec`, cast losslessly, nulls and non-finite numbers located;
    `types`: other types for some of them."""
    import pyarrow.parquet as pq  # (here: a TREC file needs none of its 30 ms of imports)

    required, optional = spec
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
        names = [n for n in file.schema_arrow.names if not _PANDAS_INDEX.fullmatch(n)]
        for name in names:
            if name not in required and name not in optional:
                raise InputError(path, f"unexpected column; accepted: {accepted}", field=name)
        for name in required:
            if name not in names:
                raise InputError(path, f"column is missing; accepted: {accepted}", field=name)
        kinds = required | optional | (types or {})
        wanted = {n: k for n, k in kinds.items() if n in names}
        table = file.read(columns=list(wanted))
    except UnicodeDecodeError:
        raise InputError(path, "has a column name that is not UTF-8") from None
    except (OSError, pa.ArrowException) as exc:
        detail = " ".join(str(exc).split())
        raise InputError(
            path, f"is not a readable Parquet file ({quote_repr(detail)[1:-1]})"
        ) from None
    with ThreadPoolExecutor(max_workers=2) as pool:  # (Arrow's checks release the GIL)
        checked = pool.map(lambda n: _lossless(path, n, table.column(n), wanted[n]), wanted)
        return pa.table(dict(zip(wanted, checked, strict=True)))


def _bad_row(
    path: Path, name: str, mask: pa.Array, problem: str, values: pa.Array | None = None
) -> None:
    """Raise naming the first row (1-based) where `mask` is true, if any, and its value."""
    rows = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    if rows.size:
        shown = "" if values is None else f"{quote_repr(values[int(rows[0])].as_py())} "
        raise InputError(path, f"row {rows[0] + 1}: {shown}{problem}", field=name)


def _lossless(path: Path, name: str, column: pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """`column` as `target`, or InputError when the cast could change a value."""
    # (combining copies even a single chunk: 5M ids, 90 MB, for nothing)
    values = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    kind = values.type
    if pa.types.is_dictionary(kind):
        values, kind = values.dictionary_decode(), kind.value_type
    if pa.types.is_null(kind):
        return pa.nulls(len(values), target)
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        strings = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
        if not any(is_kind(kind) for is_kind in strings):
            raise InputError(path, f"has type {kind}, expected a string", field=name)
        try:
            values.validate(full=True)  # Parquet readers do not check that strings are UTF-8
        except pa.ArrowInvalid:
            raise InputError(path, "holds text that is not UTF-8", field=name) from None
        return values.cast(target)
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if not numeric:
        raise InputError(path, f"has type {kind}, expected {target}", field=name)
    as_float = values.cast(pa.float64(), safe=False)  # exact near the bounds checked below
    if pa.types.is_floating(kind):
        infinite = pc.invert(pc.is_finite(as_float))
        _bad_row(path, name, pc.fill_null(infinite, False), "is not a finite number", values)
    if pa.types.is_integer(target):
        if pa.types.is_floating(kind):
            fraction = pc.not_equal(as_float, pc.floor(as_float))
            _bad_row(path, name, pc.fill_null(fraction, False), "is not an integer", values)
        low, high = INT32
        outside = pc.or_(pc.less(as_float, low), pc.greater(as_float, high))
        _bad_row(
            path, name, pc.fill_null(outside, False), f"is out of range ({low} to {high})", values
        )
    elif pa.types.is_integer(kind):
        inexact = pc.greater_equal(pc.abs(as_float), float(_EXACT_FLOAT_INT))
        _bad_row(path, name, pc.fill_null(inexact, False), "is not exact as a float64", values)
        return as_float
    return values.cast(target)


def no_nulls(path: Path, table: pa.Table, names: tuple[str, ...], hits: pa.Array | None = None):
    """InputError naming the first row where a column of `names` has no value (among `hits`)."""
    for name in names:
        missing = table.column(name).is_null()
        if hits is not None:
            missing = pc.and_(missing, hits)
        _bad_row(path, name, missing, "has no value")


def no_repeat(path: Path, query: pa.Array, doc: pa.Array, rows: np.ndarray, verb: str) -> None:
    """InputError naming the first of `rows` whose (query, doc) pair an earlier one has."""
    found = first_repeat(query.take(pa.array(rows)), doc.take(pa.array(rows)))
    if found is not None:
        row, first = (int(rows[i]) for i in found)
        raise InputError(
            path,
            f"row {row + 1}: query {quote_repr(query[row].as_py())} {verb} doc "
            f"{quote_repr(doc[row].as_py())} again (first on row {first + 1})",
            field="doc_id",
        )
