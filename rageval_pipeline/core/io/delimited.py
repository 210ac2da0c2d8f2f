"""Delimited text into typed Arrow columns, checked without a Python loop over rows.

A file is tokenised by pyarrow's multithreaded CSV reader with explicit column types, then
checked by Arrow compute kernels; a few byte scans of the raw file (a lone `\\r`, `0x`, a
space in a tab format) and the parsed text columns' smallest and largest bytes (ASCII? any
whitespace?) decide how much checking the columns need. When the fast read or any check
fails, the file is tokenised again line by line in Arrow (regex split, line numbers kept)
and the same checks name the first bad line and field. That second pass is also the
definition: the fast one is only a shortcut for files it reads identically.

The rules, the same for every text format:
- a line ends at `\\n` (an optional `\\r` before it is dropped); blank lines are skipped;
- whitespace formats split at runs of spaces and tabs; tab formats at each single tab;
- in a whitespace format, a line holding a tab and a space inside what lies between tabs is
  ambiguous and refused: `q1<TAB>d1 x<TAB>1` is 4 fields at whitespace, 3 (`d1 x`) at tabs;
- every line has exactly the format's fields; no field is empty or contains whitespace;
- integers are `-?[0-9]+` within int32; reals are decimal (`1`, `-.5`, `2.5e-3`), finite.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.field_checks import TextFormat, checked, quote_repr
from rageval_pipeline.core.io.keys import arrow_strings, pair_keys, shared_keys

PARQUET_MAGIC = b"PAR1"  # a Parquet file's first bytes
# pyarrow.csv's block: 4 MB parsed 0.35-0.45 s on the 186 MB bench run, 16 MB 0.45-0.52 s.
_BLOCK = 4 << 20
# Files up to a few blocks parse in one thread about as fast (10 MB: 0.05 s, 0.04 s on two),
# and then never wait behind another file's blocks in pyarrow's shared pool (`rageval eval`
# reads the qrels while the run parses).
_THREADED_FROM = 4 * _BLOCK


@dataclass(frozen=True)
class Fetched:
    """A file's bytes (`bounds.input_bytes`) and, unless they are Parquet, pyarrow.csv's
    reading of them as `fmt` (`_fast_columns`), made by `fetch` for `read_text` to finish."""

    path: Path
    data: bytes
    fmt: TextFormat
    fast: tuple[dict[str, pa.Array], bool, bool] | None  # None for Parquet too

    @property
    def text(self) -> bool:
        """False for Parquet bytes, which are not parsed ahead."""
        return self.data[:4] != PARQUET_MAGIC


def fetch(path: Path, data: bytes, fmt: TextFormat) -> Fetched:
    """The CSV parse of a file's bytes as `fmt`, the longest step of reading a file that
    releases the GIL, so a thread can run it while its caller imports pandas (0.4 s, which
    this module's imports avoid) or the measures engine."""
    text = data[:4] != PARQUET_MAGIC
    return Fetched(path, data, fmt, _fast_columns(data, fmt, fmt.skip) if text else None)


def first_line(data: bytes) -> bytes:
    """The first line, without a byte order mark or line end (no copy of the rest)."""
    end = data.find(b"\n")
    return (data if end < 0 else data[:end]).removeprefix(b"\xef\xbb\xbf").rstrip(b"\r")


def read_text(
    path: Path, data: bytes, fmt: TextFormat, accepted: str, ahead: Fetched | None = None
) -> tuple[pa.Table, np.ndarray | None]:
    """The file's rows as a table (integers int32, reals float64, the rest strings), and the
    `keys.pair_keys` of its `fmt.unique` columns when the fast read computed them (all
    distinct: no pair repeats), else None. `ahead`: these bytes `fetch`ed, CSV parse done."""
    table = fast_table(data, fmt, ahead)
    if table is not None:
        keys = distinct_pair_keys(table, fmt)
        if keys is not None:
            return table, keys
    return exact_table(path, data, fmt, accepted), None


def fast_table(data: bytes, fmt: TextFormat, ahead: Fetched | None = None) -> pa.Table | None:
    """`read_text`'s table by pyarrow.csv, its checks passed; None when the line-by-line pass
    must decide (the fast read failed, or a check did: that pass names the line)."""
    if ahead is not None and ahead.text and ahead.fmt == fmt and ahead.data is data:
        fast = ahead.fast
    else:
        fast = _fast_columns(data, fmt, fmt.skip)
    if fast is None:
        return None
    columns, spaced, hexed = fast
    table, bad = checked(columns, fmt, spaced=spaced, hexed=hexed)
    return table if bad is None else None


def distinct_pair_keys(
    table: pa.Table, fmt: TextFormat, starts: np.ndarray | None = None
) -> np.ndarray | None:
    """The `table_pair_keys` of a `fast_table`; None when two are equal (a repeated pair,
    which `exact_table` names, or a fingerprint collision)."""
    keys = table_pair_keys(table, fmt, starts)
    return None if shared_keys(keys).size else keys


def table_pair_keys(
    table: pa.Table, fmt: TextFormat, starts: np.ndarray | None = None
) -> np.ndarray:
    """The `keys.pair_keys` of a table's `fmt.unique` columns (`starts`: the first's
    `keys.id_block_starts`, when known)."""
    query, doc = (arrow_strings(table.column(name)) for name in fmt.unique)
    return pair_keys(query, doc, starts=starts)


def exact_table(path: Path, data: bytes, fmt: TextFormat, accepted: str) -> pa.Table:
    """`read_text`'s table by the line-by-line pass, or InputError naming the first bad line
    and field (a repeated pair included)."""
    numbers, columns = _columns_by_line(path, data, fmt, fmt.skip, accepted)
    table, bad = checked(columns, fmt)
    if bad is None:
        bad = _duplicate(columns, fmt, numbers)
    if bad is None:
        return table
    row, field, problem = bad
    raise InputError(path, problem, line=int(numbers[row]), field=field)


def _fast_columns(
    data: bytes, fmt: TextFormat, skip: int
) -> tuple[dict[str, pa.Array], bool, bool] | None:
    """(columns, spaced, hexed) by pyarrow.csv, or None when it could read the file otherwise
    than the rules (a lone carriage return is a line end to it; other failures are reported by
    the slow path). `spaced`/`hexed`: a text field may hold whitespace; the bytes hold `0x`.

    Numbers are parsed by the CSV reader itself unless a byte could make its number parsers
    accept what the rules do not: `0x` (hexadecimal), or a space in a tab-separated format
    (they trim spaces and tabs around a number). `nan`, `inf` are caught as non-finite. A
    whitespace-separated file holding a tab is left to the line pass, which refuses a line
    mixing tabs and spaces (pyarrow would split it at spaces and trim the tab).
    Else every column is read as text and checked. Whether text fields may hold whitespace
    is told from the parsed text columns' bytes: printable ASCII without the space needs no
    check; text columns with other bytes than ASCII are then validated as UTF-8.

    Named fast path: the byte scans (a tab, a lone carriage return, `0x`: memchr passes that
    hold the GIL) run in a second thread while pyarrow parses, which releases it; the parse is
    done again as text in the rare file holding `0x`. On the bench's 171 MB run the scans take
    0.075 s (bench/README.md, "Fast paths in one place")."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        scanned = pool.submit(_scanned, data, fmt)
        typed = not (fmt.tab and b" " in data)
        table = _csv(data, fmt, skip, typed=typed)
        plain, hexed = scanned.result()
    if not plain:
        return None
    if hexed and typed:
        table = _csv(data, fmt, skip, typed=False)
    if table is None or (skip and first_line(data) != fmt.header.encode()):
        return None
    text = [c for c in table.columns if not pa.types.is_primitive(c.type)]
    low, high = _byte_range(text)
    if high >= 0x80:
        try:
            for column in text:
                column.validate(full=True)  # (full validation checks a string's UTF-8)
        except pa.ArrowInvalid:
            return None
    # Only the id columns are made contiguous (fingerprints read their buffers), each by a
    # thread (Arrow's copy releases the GIL: 0.04 s of 0.08 s on the 171 MB bench run) with
    # the table let go, so each one's chunks are freed once copied.
    columns = {name: table.column(name) for name in fmt.fields}
    del table, text
    with ThreadPoolExecutor(max_workers=len(fmt.unique)) as pool:
        joined = pool.map(pa.ChunkedArray.combine_chunks, [columns[n] for n in fmt.unique])
        columns.update(zip(fmt.unique, joined, strict=True))
    return columns, not (low > 0x20 and high < 0x80), hexed


def _scanned(data: bytes, fmt: TextFormat) -> tuple[bool, bool]:
    """(whether pyarrow.csv reads the bytes as the line rules do, whether they hold `0x`)."""
    if not fmt.tab and b"\t" in data:  # lines may mix tabs and spaces, which the line
        return False, False  # pass refuses (pyarrow's number parsers would trim a tab)
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return False, False
    return True, _hexed(data)


def _byte_range(columns: list[pa.ChunkedArray]) -> tuple[int, int]:
    """The smallest and the largest byte of these string columns' values (255, 0 for none),
    by one Arrow kernel over views of their data buffers."""
    views = []
    for column in columns:
        for chunk in column.chunks:
            width = np.dtype(np.int64 if pa.types.is_large_string(chunk.type) else np.int32)
            _, offsets, values = chunk.buffers()
            first, last = np.frombuffer(
                offsets, width, len(chunk) + 1, chunk.offset * width.itemsize
            )[[0, -1]]
            if last > first:
                buffers = [None, values]
                views.append(
                    pa.Array.from_buffers(pa.uint8(), int(last - first), buffers, 0, int(first))
                )
    if not views:
        return 255, 0
    found = pc.min_max(pa.chunked_array(views, pa.uint8()))
    return found["min"].as_py(), found["max"].as_py()


def _threaded(data: bytes) -> bool:
    return len(data) > _THREADED_FROM


def _csv(data: bytes, fmt: TextFormat, skip: int, typed: bool) -> pa.Table | None:
    """pyarrow.csv's reading of the bytes as `fmt` (numbers `typed` or text), or None when it
    fails. Text is not validated as UTF-8 here: most files are ASCII (`_fast_columns`)."""
    # Ids as large_string: what fingerprints and the measures engine read, with no cast.
    types = dict.fromkeys(fmt.fields, pa.string()) | dict.fromkeys(fmt.unique, pa.large_string())
    if typed:
        types |= dict.fromkeys(fmt.integers, pa.int32()) | dict.fromkeys(fmt.reals, pa.float64())
    try:
        return pv.read_csv(
            pa.BufferReader(data),
            read_options=pv.ReadOptions(
                column_names=list(fmt.fields),
                skip_rows=skip,
                block_size=_BLOCK,
                use_threads=_threaded(data),
            ),
            parse_options=pv.ParseOptions(
                delimiter="\t" if fmt.tab else " ",
                quote_char=False,
                escape_char=False,
                double_quote=False,
                newlines_in_values=False,
                ignore_empty_lines=True,
            ),
            convert_options=pv.ConvertOptions(
                column_types=types,
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None


def _hexed(data: bytes) -> bool:
    """Whether the bytes hold `0x` or `0X` (read as hexadecimal by the CSV integer parser).
    Two memchr scans usually settle it; a byte search for the pair would take 10x longer."""
    if b"x" not in data and b"X" not in data:
        return False
    raw = np.frombuffer(data, np.uint8)
    after_x = np.flatnonzero((raw[1:] | 0x20) == ord("x"))
    return bool(np.any(raw[after_x] == ord("0")))


def _columns_by_line(
    path: Path, data: bytes, fmt: TextFormat, skip: int, accepted: str
) -> tuple[np.ndarray, dict[str, pa.Array]]:
    """(line number of each row, columns): the authoritative tokenising, in Arrow kernels."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(path, f"is not UTF-8 text (byte {exc.start})", line=line) from None
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    lines = pc.utf8_rtrim(lines, characters="\r")
    if skip:
        if not len(lines) or lines[0].as_py() != fmt.header:
            first = lines[0].as_py() if len(lines) else ""
            raise InputError(
                path, f"header {quote_repr(first)} is not {quote_repr(fmt.header)}", line=1
            )
        lines = lines.slice(1)
    stripped = pc.utf8_trim(lines, characters=" \t")
    kept = np.flatnonzero(pc.greater(pc.utf8_length(stripped), 0).to_numpy(zero_copy_only=False))
    numbers = kept + 1 + skip
    if fmt.tab:
        fields = pc.split_pattern(lines.take(pa.array(kept)), "\t")
    else:
        fields = pc.split_pattern_regex(stripped.take(pa.array(kept)), "[ \t]+")
    counts = pc.list_value_length(fields).to_numpy(zero_copy_only=False)
    wrong = np.flatnonzero(counts != len(fmt.fields))
    if not fmt.tab and "\t" in text:
        _refuse_mixed(path, stripped.take(pa.array(kept)), numbers, fmt, accepted, wrong)
    if wrong.size:
        row = wrong[0]
        separated = "tab-separated" if fmt.tab else "whitespace-separated"
        raise InputError(
            path,
            f"found {counts[row]} {separated} fields, expected {len(fmt.fields)} for "
            f"{fmt.name}; accepted: {accepted}",
            line=int(numbers[row]),
        )
    flat = fields.flatten()
    n = len(fmt.fields)
    columns = {
        name: flat.take(pa.array(np.arange(i, len(flat), n))) for i, name in enumerate(fmt.fields)
    }
    return numbers, columns


_INNER_SPACE = "[^ \t]( +)[^ \t]"  # spaces between two characters of one tab-separated value


def _refuse_mixed(
    path: Path,
    lines: pa.Array,
    numbers: np.ndarray,
    fmt: TextFormat,
    accepted: str,
    wrong: np.ndarray,
) -> None:
    """In a whitespace format, refuse the first line (ends trimmed) holding a tab and a space
    inside what lies between tabs, unless a line with the wrong number of fields comes
    first: split at tabs it is another format's line with a value holding a space (BEIR
    qrels without their header). Never guess which."""
    mixed = pc.and_(pc.match_substring(lines, "\t"), pc.match_substring_regex(lines, _INNER_SPACE))
    found = np.flatnonzero(mixed.to_numpy(zero_copy_only=False))
    if not found.size or (wrong.size and wrong[0] < found[0]):
        return
    line = lines[int(found[0])].as_py()
    space = re.search(_INNER_SPACE, line).start(1)
    by_tab, by_space = line.split("\t"), re.split("[ \t]+", line)
    value = by_tab[line.count("\t", 0, space)]  # the tab-separated value holding the space
    after = len(re.split("[ \t]+", line[:space]))  # whitespace-split values before the space
    raise InputError(
        path,
        f"ambiguous: the line separates fields by both tabs and spaces, so {quote_repr(value)} may "
        f"be one value: {len(by_space)} whitespace-separated fields for {fmt.name}, "
        f"{len(by_tab)} tab-separated; refused rather than guessed; accepted: {accepted}",
        line=int(numbers[found[0]]),
        field=fmt.fields[min(after, len(fmt.fields) - 1)],
    )


def _duplicate(
    columns: dict[str, pa.Array], fmt: TextFormat, numbers: np.ndarray
) -> tuple[int, str, str] | None:
    """(row, field, problem) of the first row whose (query, doc) pair an earlier row already
    has (`numbers`: each row's line, for the message), or None."""
    query, doc = (columns[name] for name in fmt.unique)
    found = first_repeat(query, doc)
    if found is None:
        return None
    row, first = found
    problem = (
        f"query {quote_repr(query[row].as_py())} lists doc {quote_repr(doc[row].as_py())} again "
        f"(first on line {numbers[first]})"
    )
    return row, fmt.unique[1], problem


def first_repeat(query: pa.Array, doc: pa.Array) -> tuple[int, int] | None:
    """(row, earlier row) of the first row whose (query, doc) pair an earlier row has, or None.

    Pairs are compared by 64-bit fingerprints (one sort); only rows whose fingerprint repeats
    are compared as strings, so a collision never reports a false duplicate.
    """
    query, doc = arrow_strings(query), arrow_strings(doc)
    rows = shared_keys(pair_keys(query, doc))
    if not rows.size:
        return None
    frame = pa.table({"q": query.take(pa.array(rows)), "d": doc.take(pa.array(rows))}).to_pandas()
    repeats = np.flatnonzero(frame.duplicated().to_numpy())
    if not repeats.size:  # fingerprints collided; the ids differ
        return None
    at = repeats[0]
    match = (frame["q"] == frame["q"].iloc[at]) & (frame["d"] == frame["d"].iloc[at])
    return int(rows[at]), int(rows[np.flatnonzero(match.to_numpy())[0]])
