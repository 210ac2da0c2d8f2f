"""Readers and writers for TREC runs, TREC and BEIR qrels, and Parquet.

Readers return tables shaped like `core.tables` QRELS and RUN. Text files are parsed by pandas
first; when anything looks wrong, a line-by-line scan finds the first bad line and raises an
InputError naming the file, the 1-based line and the field. The qrels format is told from the
content (Parquet magic bytes, BEIR header, number of fields), never from the file name.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from rageval_pipeline.core import tables
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.ranking import order_run

TREC_RUN_FIELDS = ("query_id", "iteration", "doc_id", "rank", "score", "tag")
TREC_QRELS_FIELDS = ("query_id", "iteration", "doc_id", "relevance")
BEIR_QRELS_FIELDS = ("query_id", "doc_id", "relevance")
BEIR_HEADER = ("query-id", "corpus-id", "score")


def _integer(text: str) -> object:
    return int(text)


def _finite(text: str) -> object:
    value = float(text)
    if not np.isfinite(value):
        raise ValueError(text)
    return value


# What a field must parse as, and how the problem is worded when it does not.
_CHECKS: dict[str, tuple[Callable[[str], object], str]] = {
    "rank": (_integer, "is not an integer"),
    "relevance": (_integer, "is not an integer"),
    "score": (_finite, "is not a finite number"),
}


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file")
    return path


def _is_parquet(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) == b"PAR1"


def _lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, text) of the non-blank lines; InputError on bad UTF-8."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(path, "is not UTF-8 text", line=line) from None
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _split(line: str, sep: str | None) -> list[str]:
    return [f.strip() for f in line.split(sep)] if sep else line.split()


def _scan(
    path: Path, names: Sequence[str], sep: str | None, skip: int, key: Sequence[str]
) -> pd.DataFrame:
    """Parse line by line, raising at the first bad line: the authoritative (slow) path."""
    rows: list[list[str]] = []
    seen: dict[tuple[str, ...], int] = {}
    for number, line in _lines(path):
        if number <= skip:
            continue
        fields = _split(line, sep)
        if len(fields) != len(names):
            raise InputError(
                path,
                f"expected {len(names)} fields ({' '.join(names)}), found {len(fields)}",
                line=number,
            )
        for name, value in zip(names, fields, strict=True):
            if name in _CHECKS:
                parse, problem = _CHECKS[name]
                try:
                    parse(value)
                except ValueError:
                    raise InputError(
                        path, f"{value!r} {problem}", line=number, field=name
                    ) from None
        ident = tuple(fields[names.index(k)] for k in key)
        if ident in seen:
            raise InputError(
                path,
                f"query {ident[0]!r} lists doc {ident[1]!r} again (first on line {seen[ident]})",
                line=number,
                field="doc_id",
            )
        seen[ident] = number
        rows.append(fields)
    return pd.DataFrame(rows, columns=list(names), dtype=str)


def _read_text(path: Path, names: Sequence[str], *, sep: str | None, skip: int = 0) -> pd.DataFrame:
    """All fields as strings, checked; pandas when the file is clean, else `_scan` explains."""
    key = ("query_id", "doc_id")
    try:
        frame = pd.read_csv(
            path,
            sep=sep or r"\s+",
            header=None,
            names=list(names),
            dtype=str,
            skiprows=skip,
            quoting=csv.QUOTE_NONE,
            na_filter=False,
            engine="c",
            encoding="utf-8",
        )
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError):
        return _scan(path, names, sep, skip, key)
    clean = not frame.isna().any().any() and not (frame == "").any().any()
    for name in set(names) & set(_CHECKS):
        if not clean:
            break
        numbers = pd.to_numeric(frame[name], errors="coerce")
        if name == "score":
            clean = bool(np.isfinite(numbers.to_numpy(dtype=np.float64, na_value=np.nan)).all())
        else:
            clean = pd.api.types.is_integer_dtype(numbers)
    if not clean or frame.duplicated(list(key)).any():
        return _scan(path, names, sep, skip, key)
    return frame


def _text_qrels(path: Path) -> pd.DataFrame:
    lines = _lines(path)
    if not lines:
        raise InputError(path, "has no judgments")
    number, first = lines[0]
    header = tuple(f.lower() for f in _split(first, "\t" if "\t" in first else None))
    if header == BEIR_HEADER:
        return _read_text(path, BEIR_QRELS_FIELDS, sep="\t", skip=number)
    fields = first.split()
    if len(fields) == len(TREC_QRELS_FIELDS):
        return _read_text(path, TREC_QRELS_FIELDS, sep=None)
    if len(fields) == len(BEIR_QRELS_FIELDS):
        return _read_text(path, BEIR_QRELS_FIELDS, sep="\t" if "\t" in first else None)
    raise InputError(
        path,
        f"found {len(fields)} fields; expected TREC qrels (query_id iteration doc_id relevance) "
        "or BEIR qrels (query-id corpus-id score)",
        line=number,
    )


def _parquet(path: Path, required: Sequence[str]) -> pd.DataFrame:
    try:
        frame = pd.read_parquet(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, f"cannot read Parquet: {exc}") from None
    for column in required:
        if column not in frame.columns:
            raise InputError(path, "column is missing", field=column)
    return frame


def _null_row(path: Path, frame: pd.DataFrame, columns: Sequence[str]) -> None:
    for column in columns:
        missing = np.flatnonzero(frame[column].isna().to_numpy())
        if missing.size:
            raise InputError(path, f"row {missing[0] + 1} has no value", field=column)


def read_qrels(path: str | Path, split: str | None = None) -> pd.DataFrame:
    """Read TREC (`q1 0 doc 1`), BEIR (`query-id corpus-id score` TSV) or Parquet qrels.

    Returns a QRELS table; `split` fills the split column (Parquet keeps its own when None).
    """
    path = _existing(path)
    if _is_parquet(path):
        frame = _parquet(path, ("query_id", "doc_id", "relevance"))
        _null_row(path, frame, ("query_id", "doc_id", "relevance"))
        relevance = pd.to_numeric(frame["relevance"], errors="coerce")
        bad = np.flatnonzero((relevance.isna() | (relevance % 1 != 0)).to_numpy())
        if bad.size:
            raise InputError(path, f"row {bad[0] + 1} is not an integer", field="relevance")
        _no_duplicate_pairs(path, frame, frame.duplicated(["query_id", "doc_id"]), "judges")
        frame = frame.assign(relevance=relevance.astype(np.int64))
        if split is not None or "split" not in frame.columns:
            frame = frame.assign(split=split)
        if "level" not in frame.columns:
            frame = frame.assign(level="document")
    else:
        frame = _text_qrels(path).assign(split=split, level="document")
        frame["relevance"] = frame["relevance"].astype(np.int64)
    frame = frame.astype({"query_id": str, "doc_id": str})
    return tables.conform(frame, tables.QRELS).to_pandas()


def _no_duplicate_pairs(path: Path, frame: pd.DataFrame, duplicated: pd.Series, verb: str) -> None:
    """InputError naming the first Parquet row that repeats a (query, doc) pair."""
    rows = np.flatnonzero(duplicated.to_numpy())
    if rows.size:
        row = frame.iloc[rows[0]]
        raise InputError(
            path,
            f"row {rows[0] + 1}: query {row['query_id']!r} {verb} doc {row['doc_id']!r} twice",
            field="doc_id",
        )


def read_run(path: str | Path) -> pd.DataFrame:
    """Read a TREC run (`qid Q0 doc rank score tag`) or a Parquet run into a RUN table.

    Ranks are recomputed in trec_eval order (score desc, doc id desc); the file's rank column
    is checked to be an integer but not trusted. Text runs get source_id = doc_id and no latency.
    """
    path = _existing(path)
    if _is_parquet(path):
        frame = _parquet(path, ("query_id", "doc_id", "score"))
        _null_row(path, frame, ("query_id",))
        hit = frame["doc_id"].notna()
        _null_row(path, frame[hit], ("score",))
        _no_duplicate_pairs(
            path, frame, frame.duplicated(["query_id", "doc_id"]) & hit, "retrieves"
        )
        if "source_id" not in frame.columns:
            frame = frame.assign(source_id=frame["doc_id"])
        if "latency_ms" not in frame.columns:
            frame = frame.assign(latency_ms=np.nan)
    else:
        frame = _read_text(path, TREC_RUN_FIELDS, sep=None)
        if frame.empty:
            raise InputError(path, "has no results")
        frame = frame.assign(
            score=frame["score"].astype(np.float64), source_id=frame["doc_id"], latency_ms=np.nan
        )
    frame = frame.assign(score=pd.to_numeric(frame["score"]))
    return tables.conform(order_run(frame), tables.RUN).to_pandas()


def write_trec_run(run: pd.DataFrame, path: str | Path, tag: str) -> None:
    """Write the run's results as a TREC run file in trec_eval order (placeholders skipped).

    Scores are written with full precision (repr), so reading the file back gives the same run.
    """
    if not tag or any(c.isspace() for c in tag):
        raise InputError(path, f"run tag {tag!r} must be one word", field="tag")
    hits = order_run(run[run["doc_id"].notna()])
    for column in ("query_id", "doc_id"):
        spaced = hits[column].astype(str).str.contains(r"\s", regex=True)
        if spaced.any():
            raise InputError(
                path,
                f"id {hits[column][spaced].iloc[0]!r} contains whitespace",
                field=column,
            )
    lines = (
        hits["query_id"].astype(str)
        + " Q0 "
        + hits["doc_id"].astype(str)
        + " "
        + hits["rank"].astype(str)
        + " "
        + hits["score"].map(repr)
        + f" {tag}\n"
    )
    Path(path).write_text("".join(lines), encoding="utf-8")
