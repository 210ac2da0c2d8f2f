"""The checks of a delimited file's columns, by Arrow kernels (no Python loop over rows): every
value is one its field allows, and the first that is not is found in file order (`checked`).

The field rules (`core.io.delimited` tokenises): no field is empty or holds whitespace; integers
are `-?[0-9]+` within int32; reals are decimal (`1`, `-.5`, `2.5e-3`), finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INTEGER = r"^-?[0-9]+$"
REAL = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
# Any Unicode whitespace (RE2's \s is ASCII only), as Python's str.split would see it.
WHITESPACE = r"[\s\v\p{Z}\x{85}\x{1c}-\x{1f}]"
INT32 = (-(2**31), 2**31 - 1)
QUOTE_LIMIT = 200  # characters of a bad value quoted in an error message


@dataclass(frozen=True)
class TextFormat:
    """A delimited format: its fields, their kinds and separator, checked here and
    tokenised by `delimited`."""

    name: str
    fields: tuple[str, ...]
    tab: bool  # True: fields separated by one tab; False: by runs of spaces and tabs
    integers: tuple[str, ...] = ()
    reals: tuple[str, ...] = ()
    header: str | None = None  # the exact first line, when the format has one
    unique: tuple[str, str] = ("query_id", "doc_id")

    @property
    def skip(self) -> int:
        """Lines before the rows: the header's, when the format has one."""
        return 1 if self.header is not None else 0


def quote_repr(value: object) -> str:
    """repr of a delimited file's field value, cut to QUOTE_LIMIT characters: Python's escapes
    show the tabs, carriage returns and control bytes the line rules are about. Values of
    structured files are shown as JSON by `bounds.quote_json`."""
    text = repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "...'"


def _first(mask: pa.Array | np.ndarray) -> int | None:
    """Index of the first true value of a mask, or None."""
    if isinstance(mask, pa.Array | pa.ChunkedArray):
        if not pc.any(mask).as_py():
            return None
        mask = mask.to_numpy(zero_copy_only=False)
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def checked(
    columns: dict[str, pa.Array],
    fmt: TextFormat,
    spaced: bool = True,
    hexed: bool = True,
) -> tuple[pa.Table, tuple[int, str, str] | None]:
    """(typed table, None) or (partial table, the first (row, field, problem) in file order).

    `spaced`, `hexed` False: the caller knows no field holds whitespace, or `0x`. Cheap
    kernels (casts, byte lengths) decide whether a column is clean; the slower regexes only
    run to find a bad row.
    """
    found: list[tuple[int, int, str, str]] = []  # (row, field position, field, problem)

    def report(row: int | None, field: str, problem: object) -> None:
        if row is not None:
            found.append((row, fmt.fields.index(field), field, str(problem)))

    typed = dict(columns)
    for name, values in columns.items():
        if pa.types.is_integer(values.type):  # parsed by the CSV reader: int32 by construction
            continue
        if pa.types.is_floating(values.type):
            row = _first(pc.invert(pc.is_finite(values)))
            shown = quote_repr(None if row is None else values[row].as_py())
            report(row, name, f"{shown} is not a finite number")
            continue
        # (An equality bitmap: a length per row would be a 20-40 MB column to find none.)
        report(_first(pc.equal(values, pa.scalar("", values.type))), name, "is empty")
        if spaced:
            row = _first(pc.match_substring_regex(values, WHITESPACE))
            if row is not None:
                report(row, name, f"{quote_repr(values[row].as_py())} contains whitespace")
        if name in fmt.integers:
            typed[name] = _integers(values, name, report, hexed)
        elif name in fmt.reals:
            typed[name] = _reals(values, name, report)
    table = pa.table({k: v for k, v in typed.items() if v is not None})
    if not found:
        return table, None
    row, _, field, problem = min(found)
    return table, (row, field, problem)


def _cast(values: pa.Array, kind: pa.DataType) -> pa.Array | None:
    try:
        return pc.cast(values, kind)
    except pa.ArrowInvalid:
        return None


def _integers(values: pa.Array, name: str, report, hexed: bool) -> pa.Array | None:
    numbers = _cast(values, pa.int64())  # also reads hexadecimal `0x1f`: refused below
    if hexed and numbers is not None:
        numbers = (
            None if pc.any(pc.match_substring(values, "0x", ignore_case=True)).as_py() else numbers
        )
    if numbers is None:
        row = _first(pc.invert(pc.match_substring_regex(values, INTEGER)))
        if row is not None:
            report(row, name, f"{quote_repr(values[row].as_py())} is not an integer")
            return None
        # Well-formed but maybe past int64: more than 10 significant digits is past int32.
        digits = pc.utf8_ltrim(pc.utf8_ltrim(values, characters="-"), characters="0")
        numbers = pc.cast(
            pc.if_else(pc.greater(pc.utf8_length(digits), 10), "1e10", values), pa.float64()
        )
    low, high = INT32
    row = _first(pc.or_(pc.less(numbers, low), pc.greater(numbers, high)))
    if row is not None:
        report(row, name, f"{quote_repr(values[row].as_py())} is out of range ({low} to {high})")
        return None
    return pc.cast(numbers, pa.int32())


def _reals(values: pa.Array, name: str, report) -> pa.Array | None:
    numbers = _cast(values, pa.float64())
    infinite = None if numbers is None else pc.invert(pc.is_finite(numbers))
    if infinite is not None and _first(infinite) is None:
        return numbers
    bad = pc.invert(pc.match_substring_regex(values, REAL))
    row = _first(bad if infinite is None else pc.or_(bad, infinite))
    row = 0 if row is None else row  # (a cast refusing what the pattern accepts: say so too)
    report(row, name, f"{quote_repr(values[row].as_py())} is not a finite number")
    return None
