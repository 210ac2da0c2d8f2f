"""Fuzzing the readers: whatever the bytes, an InputError or a valid table, never another error.

Each reader gets arbitrary bytes and structured mutations of a valid file (nasty tokens in a
field, separators swapped, lines repeated or cut, bytes flipped). The text readers are also
checked differentially: when the fast columnar path accepts a file, the line-by-line path
must read exactly the same table. The number of examples per test comes from
RAGEVAL_FUZZ_EXAMPLES (default 200, what CI affords); a long run sets it to 100000.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import delimited, field_checks, tables
from rageval_pipeline.core.io.bounds import input_bytes
from rageval_pipeline.core.io.formats import (
    BEIR_QRELS,
    TREC_QRELS,
    TREC_RUN,
    read_qrels,
    read_ranked_run,
    read_run,
)
from rageval_pipeline.core.io.ranking import RankedRun
from rageval_pipeline.core.suites import loaders

EXAMPLES = int(os.environ.get("RAGEVAL_FUZZ_EXAMPLES") or 200)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
VALID = {
    "run": b"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\nq2 Q0 d1 1 0.5 t\n",
    "trec_qrels": b"q1 0 d1 2\nq1 0 d2 0\nq2 0 d9 1\n",
    "beir_qrels": b"query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td9\t1\n",
    "corpus": b'{"_id": "d1", "title": "t", "text": "a"}\n{"_id": "d2", "text": "b"}\n',
    "queries": b'{"_id": "q1", "text": "a", "metadata": {"intent": "x"}}\n',
}
NASTY = [
    "",
    " ",
    "\t",
    "\r",
    "\n",
    "\x00",
    "\x0b",
    "\u00a0",
    "\u2028",
    "\ufeff",
    "nan",
    "-inf",
    "Infinity",
    "1_0",
    "0x1f",
    "+1",
    "-0",
    "1e999",
    "1e-999",
    "2147483648",
    "-2147483649",
    "9" * 30,
    ".5",
    "5.",
    "1e5",
    "\u0661",
    "\xe9",
    '"',
    "'",
    "\\",
    "#",
    "PAR1",
    "{",
    "[]",
    '{"a": NaN}',
    "[" * 5000,
    "q1",
    "d1",
    "Q0",
    "query-id",
    "corpus-id\tscore",
]


def read_text_file(kind: str, path: Path):
    if kind == "run":
        return read_run(path)
    if kind in ("corpus", "queries"):
        return (loaders.read_corpus if kind == "corpus" else loaders.read_queries)(path)
    return read_qrels(path)


SCHEMAS = {
    "run": tables.RUN,
    "trec_qrels": tables.QRELS,
    "beir_qrels": tables.QRELS,
    "corpus": tables.CORPUS,
    "queries": tables.QUERIES,
}


def accept_or_refuse(kind: str, path: Path) -> None:
    """The reader's contract: an InputError naming the file, or a table of the right shape."""
    try:
        table = read_text_file(kind, path)
    except InputError as error:
        assert error.path == str(path)
        assert "\n" not in str(error)
        return
    assert list(table.columns) == SCHEMAS[kind].names
    text = not path.read_bytes().startswith(b"PAR1")  # (a Parquet file has no lines)
    if kind in ("run", "trec_qrels") and text:  # a line splitting otherwise at tabs was refused
        lines = [x.strip(" \t\r") for x in path.read_bytes().decode("utf-8-sig").split("\n")]
        assert not [x for x in lines if "\t" in x and re.search("[^ \t] +[^ \t]", x)]
    if kind == "run" and len(table):
        hits = table[table["doc_id"].notna()]
        assert (hits.groupby("query_id")["rank"].diff().dropna() == 1).all()
        assert not hits.duplicated(["query_id", "doc_id"]).any()


@st.composite
def mutated(draw, base: bytes) -> bytes:
    """A valid file with a few structured edits."""
    text = base.decode()
    for _ in range(draw(st.integers(1, 4))):
        lines = text.split("\n")
        edit = draw(st.sampled_from(["field", "insert", "separator", "repeat", "cut", "drop"]))
        at = draw(st.integers(0, max(len(lines) - 1, 0)))
        if edit == "field":
            fields = lines[at].split(" " if " " in lines[at] else "\t")
            fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(NASTY))
            lines[at] = (" " if " " in lines[at] else "\t").join(fields)
        elif edit == "insert":
            pos = draw(st.integers(0, len(text)))
            text = text[:pos] + draw(st.sampled_from(NASTY) | st.text(max_size=4)) + text[pos:]
            continue
        elif edit == "separator":
            lines[at] = lines[at].replace(
                *draw(st.sampled_from([(" ", "\t"), ("\t", " "), (" ", "  ")]))
            )
        elif edit == "repeat":
            lines.insert(at, lines[at])
        elif edit == "cut":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
        else:
            del lines[at]
        text = "\n".join(lines)
    encoded = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        return encoded
    flips = draw(
        st.lists(
            st.tuples(st.integers(0, max(len(encoded) - 1, 0)), st.binary(min_size=1, max_size=2)),
            max_size=2,
        )
    )
    for pos, byte in flips:
        encoded = encoded[:pos] + byte + encoded[pos + 1 :]
    return encoded


@pytest.mark.parametrize("kind", sorted(VALID))
@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes(tmp_path, kind, data):
    path = tmp_path / kind
    path.write_bytes(data)
    accept_or_refuse(kind, path)


@pytest.mark.parametrize("kind", sorted(VALID))
@FUZZ
@given(data=st.data())
def test_structured_mutations(tmp_path, kind, data):
    path = tmp_path / kind
    path.write_bytes(data.draw(mutated(VALID[kind])))
    accept_or_refuse(kind, path)


@pytest.mark.parametrize(
    ("kind", "fmt"), [("run", TREC_RUN), ("trec_qrels", TREC_QRELS), ("beir_qrels", BEIR_QRELS)]
)
@FUZZ
@given(data=st.data())
def test_fast_and_line_by_line_paths_agree(tmp_path, kind, fmt, data):
    content = data.draw(mutated(VALID[kind]))
    skip = fmt.skip
    fast = delimited._fast_columns(content, fmt, skip)
    if fast is None:
        return
    columns, spaced, hexed = fast
    table, bad = field_checks.checked(columns, fmt, spaced=spaced, hexed=hexed)
    if bad is not None:
        return
    try:
        _, columns = delimited._columns_by_line(tmp_path / kind, content, fmt, skip, "")
    except InputError as error:
        raise AssertionError(f"fast path accepted what the line path refuses: {error}") from None
    slow, slow_bad = field_checks.checked(columns, fmt)
    assert slow_bad is None, slow_bad
    assert slow.cast(table.schema).equals(table)


def ranked_outcome(read) -> tuple:
    """What a run reader gives: its error's text, or the run's table and pair keys."""
    try:
        run = read()
    except InputError as error:
        return ("error", str(error))
    if not isinstance(run, RankedRun):
        return ("table", run.to_csv(index=False))  # (NaN latencies compare equal as text)
    keys = None if run.pair_keys is None else run.pair_keys.tolist()
    return ("run", run.table().to_pydict(), keys, run.queries.to_pylist())


@FUZZ
@given(data=st.data())
def test_a_run_read_ahead_reads_as_the_file(tmp_path, data):
    # `rageval eval` reads the run's bytes and CSV columns in a thread (`delimited.fetch`);
    # finishing from those must give exactly what reading the file gives, error or run.
    path = tmp_path / "run"
    path.write_bytes(data.draw(mutated(VALID["run"]) | st.binary(max_size=300)))
    direct = ranked_outcome(lambda: read_ranked_run(path))
    ahead = ranked_outcome(lambda: read_ranked_run(delimited.fetch(*input_bytes(path), TREC_RUN)))
    assert ahead == direct


@pytest.mark.parametrize("kind", ["gzip", "parquet", "parquet with a placeholder"])
def test_a_compressed_or_parquet_run_read_ahead_reads_as_the_file(tmp_path, kind):
    path = tmp_path / "run"
    if kind == "gzip":
        import gzip

        path.write_bytes(gzip.compress(VALID["run"]))
    else:
        rows = {"query_id": ["q1", "q1", "q2"], "doc_id": ["d2", "d1", "d1"], "score": [1, 2, 3]}
        if kind != "parquet":  # (a query that retrieved nothing: read as a RUN table)
            rows = {k: [*v, None] for k, v in rows.items()} | {"query_id": ["q1", "q1", "q2", "q3"]}
        pq.write_table(pa.table(rows), path)
    direct = ranked_outcome(lambda: read_ranked_run(path))
    assert direct[0] == ("table" if "placeholder" in kind else "run")
    assert (
        ranked_outcome(lambda: read_ranked_run(delimited.fetch(*input_bytes(path), TREC_RUN)))
        == direct
    )


COLUMN_TYPES = [
    pa.string(),
    pa.large_string(),
    pa.int8(),
    pa.int64(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.null(),
    pa.dictionary(pa.int32(), pa.string()),
]
VALUES = {
    "string": st.one_of(st.none(), st.text(max_size=3)),
    "int": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    "float": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    "bool": st.one_of(st.none(), st.booleans()),
}


@st.composite
def parquet_files(draw) -> bytes:
    names = draw(
        st.lists(
            st.sampled_from(
                [
                    "query_id",
                    "doc_id",
                    "score",
                    "relevance",
                    "source_id",
                    "rank",
                    "latency_ms",
                    "split",
                    "level",
                    "tag",
                    "__index_level_0__",
                ]
            ),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    rows = draw(st.integers(0, 5))
    columns = {}
    for name in names:
        kind = draw(st.sampled_from(COLUMN_TYPES))
        family = (
            "int"
            if pa.types.is_integer(kind)
            else "float"
            if pa.types.is_floating(kind)
            else "bool"
            if pa.types.is_boolean(kind)
            else "string"
        )
        values = draw(st.lists(VALUES[family], min_size=rows, max_size=rows))
        if pa.types.is_null(kind):
            values = [None] * rows
        try:
            columns[name] = pa.array(values, kind)
        except (pa.ArrowInvalid, OverflowError, pa.ArrowNotImplementedError):
            columns[name] = pa.array([None] * rows, pa.null())
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    data = sink.getvalue()
    if draw(st.integers(0, 4)) == 0:  # sometimes a damaged file
        pos = draw(st.integers(0, len(data) - 1))
        data = data[:pos] + draw(st.binary(max_size=3)) + data[pos + 1 :]
    return data


@pytest.mark.parametrize("kind", ["run", "trec_qrels"])
@FUZZ
@given(data=parquet_files())
def test_parquet_files(tmp_path, kind, data):
    path = tmp_path / "input.parquet"
    path.write_bytes(data)
    accept_or_refuse(kind, path)
