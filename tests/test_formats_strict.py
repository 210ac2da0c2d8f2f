"""No guessing at formats: each class of malformed file is refused with one exact message.

Every test is parameterised over several instances of its class; the messages are asserted in
full (the path shortened to the file name), so a change of wording is a deliberate one.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.formats import (
    QRELS_FORMATS,
    RUN_FORMATS,
    ranked_table,
    read_qrels,
    read_run,
)
from rageval_pipeline.core.io.ranking import order_run

RUN_COUNT = "found {n} whitespace-separated fields, expected 6 for a TREC run; accepted: "
QRELS_COUNT = "found {n} whitespace-separated fields, expected 4 for TREC qrels; accepted: "
BEIR_COUNT = "found {n} tab-separated fields, expected 3 for BEIR qrels; accepted: "
BEIR = "query-id\tcorpus-id\tscore\n"


def refused(tmp_path: Path, reader, content: bytes | str) -> str:
    """The one-line message `reader` gives for a file with `content`, path cut to its name."""
    path = tmp_path / "input"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(InputError) as raised:
        reader(path)
    message = str(raised.value)
    assert "\n" not in message
    return message.replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize(
    ("reader", "content", "expected"),
    [
        # Every line with an extra column: once read as 6 columns plus an index.
        (read_run, "q1 Q0 d1 1 2.5 t x\nq1 Q0 d2 2 1.5 t x\n", "1: " + RUN_COUNT.format(n=7)),
        (read_run, "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5\n", "2: " + RUN_COUNT.format(n=5)),
        (read_run, "q1 d1 2.5\n", "1: " + RUN_COUNT.format(n=3)),
        # BEIR qrels with a fourth column.
        (read_qrels, BEIR + "q1\td1\t1\nq1\td2\t1\t0\n", "3: " + BEIR_COUNT.format(n=4)),
        # Headerless 3 columns: neither TREC qrels nor BEIR (whose header is required).
        (read_qrels, "q1\td1\t1\n", "1: " + QRELS_COUNT.format(n=3)),
        (read_qrels, "Query-Id\tCorpus-Id\tScore\nq1\td1\t1\n", "1: " + QRELS_COUNT.format(n=3)),
        (read_qrels, "q1 0 d1 1 extra\n", "1: " + QRELS_COUNT.format(n=5)),
    ],
)
def test_a_line_of_another_shape_is_refused_with_the_formats_accepted(
    tmp_path, reader, content, expected
):
    accepted = RUN_FORMATS if reader is read_run else QRELS_FORMATS
    assert refused(tmp_path, reader, content) == "input:" + expected + accepted


@pytest.mark.parametrize(
    ("reader", "content", "expected"),
    [
        (read_qrels, BEIR + "q1\tdoc a\t1\n", "input:2: doc_id: 'doc a' contains whitespace"),
        (read_qrels, BEIR + "q 1\td1\t1\n", "input:2: query_id: 'q 1' contains whitespace"),
        (read_qrels, "q1 0 d\u00a0a 1\n", "input:1: doc_id: 'd\\xa0a' contains whitespace"),
        (read_run, "q1 Q0 d\x0bb 1 2 t\n", "input:1: doc_id: 'd\\x0bb' contains whitespace"),
        (read_run, "q1 Q0 d\u2003 1 2 t\n", "input:1: doc_id: 'd\\u2003' contains whitespace"),
        (read_qrels, BEIR + "q1\t\t1\n", "input:2: doc_id: is empty"),
        # pyarrow's number parsers trim spaces and tabs: in a tab-separated file that is a
        # field holding whitespace, whatever the column's type.
        (read_qrels, BEIR + "q1\td1\t1 \n", "input:2: relevance: '1 ' contains whitespace"),
        (read_qrels, BEIR + "q1\td1\t 1\n", "input:2: relevance: ' 1' contains whitespace"),
    ],
)
def test_ids_with_whitespace_or_empty_are_refused(tmp_path, reader, content, expected):
    assert refused(tmp_path, reader, content) == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1_0", "'1_0' is not an integer"),
        ("0x1", "'0x1' is not an integer"),
        ("0X1", "'0X1' is not an integer"),
        ("+1", "'+1' is not an integer"),
        ("1.0", "'1.0' is not an integer"),
        ("nan", "'nan' is not an integer"),
        ("\uff11", "'\uff11' is not an integer"),
        ("2147483648", "'2147483648' is out of range (-2147483648 to 2147483647)"),
        ("-99999999999999999999999", "'-99999999999999999999999' is out of range"),
    ],
)
def test_integers_are_parsed_strictly(tmp_path, value, problem):
    for reader, content, line in (
        (read_qrels, f"q1 0 d0 1\nq1 0 d1 {value}\n", 2),
        (read_qrels, f"{BEIR}q1\td1\t{value}\n", 2),
        (read_run, f"q1 Q0 d1 {value} 2.5 t\n", 1),
    ):
        field = "rank" if reader is read_run else "relevance"
        assert refused(tmp_path, reader, content).startswith(f"input:{line}: {field}: {problem}")


@pytest.mark.parametrize(
    "value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "1_0.5", "1,5"]
)
def test_scores_are_finite_decimal_numbers(tmp_path, value):
    message = refused(tmp_path, read_run, f"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 {value} t\n")
    assert message == f"input:2: score: {value!r} is not a finite number"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"q1 0 d1 1\nq1 0 caf\xe9 1\n", "input:2: is not UTF-8 text (byte 18)"),
        (b"\xff\xfeq\x001\x00", "input:1: is not UTF-8 text (byte 0)"),
        (b"\x1f\x8b\x08\x00garbage", "input: is not a valid gzip file"),
        (gzip.compress(b"q1 0 d1 1\n", mtime=0)[:-6], "input: is not a valid gzip file"),
        (b"PAR1 not really PAR1", "input: is not a readable Parquet file"),
        (b"\n \n", "input: has no judgments"),
    ],
)
def test_unreadable_bytes_are_one_line(tmp_path, content, expected):
    assert refused(tmp_path, read_qrels, content).startswith(expected)


def test_a_directory_or_a_missing_file_says_so(tmp_path):
    for reader in (read_run, read_qrels):
        with pytest.raises(InputError, match=r"is a folder, not a regular file$"):
            reader(tmp_path)
        with pytest.raises(InputError, match=r"missing: no such file$"):
            reader(tmp_path / "missing")


def test_gzip_files_read_as_their_content(tmp_path):
    (tmp_path / "run.gz").write_bytes(gzip.compress(b"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 3.5 t\n"))
    assert read_run(tmp_path / "run.gz")["doc_id"].tolist() == ["d2", "d1"]


@pytest.mark.parametrize(
    "content",
    [
        "q1 Q0 d1 1 2.5 t\nq1 Q0 d1 2 1.5 t\n",
        "q1 Q0 d1 1 2.5 t\nq2 Q0 d1 1 2.5 t\n\nq1\tQ0\td1\t3\t1\tt\n",
    ],
)
def test_a_repeated_pair_names_both_lines(tmp_path, content):
    last = content.rstrip("\n").count("\n") + 1
    assert refused(tmp_path, read_run, content) == (
        f"input:{last}: doc_id: query 'q1' lists doc 'd1' again (first on line 1)"
    )


def _queries(count: int, repeat_in: int | None = None) -> str:
    """A run of `count` queries, two rows each, grouped by query; `repeat_in`: that query
    lists its first doc again on a third row."""
    lines = []
    for q in range(count):
        lines += [f"q{q} Q0 d{q}a 1 2 t", f"q{q} Q0 d{q}b 2 1 t"]
        if q == repeat_in:
            lines.append(f"q{q} Q0 d{q}a 3 0.5 t")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("content", "last", "first", "query"),
    [
        # Grouped, many queries: the reader keys them in pieces of whole queries.
        (_queries(40, repeat_in=39), 81, 79, "q39"),
        (_queries(40, repeat_in=0), 3, 1, "q0"),
        (_queries(40, repeat_in=20), 43, 41, "q20"),
        # Not grouped: a query comes back after another, so no piece may cut between.
        ("q1 Q0 d1 1 2.5 t\nq2 Q0 d1 1 2.5 t\nq3 Q0 d3 1 2 t\nq1 Q0 d1 3 1 t\n", 4, 1, "q1"),
    ],
)
def test_a_repeat_is_found_wherever_the_run_is_cut_for_keying(
    tmp_path, content, last, first, query
):
    assert refused(tmp_path, read_run, content) == (
        f"input:{last}: doc_id: query {query!r} lists doc "
        f"{content.splitlines()[first - 1].split()[2]!r} again (first on line {first})"
    )


@pytest.mark.parametrize(
    "content",
    [
        b"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\n",
        b"\xef\xbb\xbfq1  Q0   d1 1 2.5 t\r\n\n  q1 Q0 d2 2 1.5 t  \n",  # BOM, CRLF, runs
        b"q1\tQ0\td1\t1\t2.5\tt\nq1 Q0 d2 2 1.5 t",  # tabs, no final newline
        b"\tq1\t\tQ0\td1\t1\t2.5\tt\t\nq1\tQ0\td2\t2\t1.5\tt\n",  # runs of tabs
        b"q1 Q0 d1 01 25e-1 t\nq1 Q0 d2 -0 +1.5 t\n",
        # Spaces beside tabs only: no value between tabs holds a space, so not ambiguous.
        b"q1 \tQ0\t d1\t1 \t 2.5\tt\nq1\t Q0 \td2\t \t2\t1.5\t t\n",
    ],
)
def test_whitespace_variants_read_the_same(tmp_path, content):
    path = tmp_path / "run"
    path.write_bytes(content)
    run = read_run(path)
    assert run[["query_id", "doc_id", "rank", "score"]].values.tolist() == [
        ["q1", "d1", 1, 2.5],
        ["q1", "d2", 2, 1.5],
    ]


def parquet(tmp_path: Path, **columns) -> Path:
    path = tmp_path / "input"
    pq.write_table(pa.table(columns), path)
    return path


Q, D = pa.array(["q1", "q1"]), pa.array(["d1", "d2"])


@pytest.mark.parametrize(
    ("reader", "columns", "expected"),
    [
        (read_qrels, {"query_id": Q, "doc_id": D}, "relevance: column is missing; accepted: "),
        (
            read_run,
            {"query_id": Q, "doc_id": D, "score": [1.0, 2.0], "tag": ["a", "b"]},
            "tag: unexpected column; accepted: ",
        ),
        (
            read_qrels,
            {"query_id": pa.array([1, 2]), "doc_id": D, "relevance": [1, 2]},
            "query_id: has type int64, expected a string",
        ),
        (
            read_qrels,
            {"query_id": Q, "doc_id": D, "relevance": ["1", "2"]},
            "relevance: has type string, expected int32",
        ),
        (
            read_qrels,
            {"query_id": Q, "doc_id": D, "relevance": [1.0, 2.5]},
            "relevance: row 2: 2.5 is not an integer",
        ),
        (
            read_qrels,
            {"query_id": Q, "doc_id": D, "relevance": [1, 2**40]},
            "relevance: row 2: 1099511627776 is out of range (-2147483648 to 2147483647)",
        ),
        (
            read_run,
            {"query_id": Q, "doc_id": D, "score": [1.0, float("nan")]},
            "score: row 2: nan is not a finite number",
        ),
        (
            read_run,
            {"query_id": Q, "doc_id": D, "score": [float("-inf"), 1.0]},
            "score: row 1: -inf is not a finite number",
        ),
        (
            read_run,
            {"query_id": Q, "doc_id": D, "score": pa.array([1, 2**60])},
            "score: row 2: 1152921504606846976 is not exact as a float64",
        ),
        (
            read_run,
            {"query_id": Q, "doc_id": D, "score": [True, False]},
            "score: has type bool, expected double",
        ),
        (
            read_run,
            {"query_id": pa.array(["q1", None]), "doc_id": D, "score": [1.0, 2.0]},
            "query_id: row 2: has no value",
        ),
    ],
)
def test_parquet_is_checked_against_the_schema(tmp_path, reader, columns, expected):
    with pytest.raises(InputError) as raised:
        reader(parquet(tmp_path, **columns))
    message = str(raised.value)
    assert message.replace(str(tmp_path) + "/", "").startswith("input: " + expected)


@pytest.mark.parametrize(
    "relevance", [pa.array([1, 2], pa.int8()), pa.array([1.0, 2.0]), pa.array([1, 2], pa.uint64())]
)
def test_parquet_casts_that_lose_nothing_are_taken(tmp_path, relevance):
    strings = pa.array(["q1", "q1"], pa.large_string()).dictionary_encode()
    qrels = read_qrels(parquet(tmp_path, query_id=strings, doc_id=D, relevance=relevance))
    assert qrels[["query_id", "doc_id", "relevance"]].values.tolist() == [
        ["q1", "d1", 1],
        ["q1", "d2", 2],
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "q10", "q2"]), st.integers(0, 3)), max_size=30),
    st.randoms(use_true_random=False),
)
def test_grouped_runs_are_ordered_like_order_run(rows, rnd):
    """The no-sort path for runs grouped by query gives `order_run`'s order and ranks."""
    frame = pd.DataFrame(rows, columns=["query_id", "score"]).astype({"score": float})
    frame["doc_id"] = [f"d{i}" for i in rnd.sample(range(len(frame)), len(frame))]
    frame = frame.sort_values(["query_id", "score"], ascending=[True, False], kind="stable")
    blocks = [block for _, block in frame.groupby("query_id")]
    rnd.shuffle(blocks)
    if not blocks:
        return
    frame = pd.concat(blocks, ignore_index=True)
    run, _ = ranked_table(pa.Table.from_pandas(frame[["query_id", "doc_id", "score"]]))
    assert run.starts is not None  # (the grouped path, no sort)
    got = run.table()
    expected = order_run(frame)
    assert got.column("doc_id").to_pylist() == expected["doc_id"].tolist()
    assert got.column("rank").to_pylist() == expected["rank"].tolist()


def non_utf8_name(tmp_path: Path) -> Path:
    """A Parquet file whose schema names a column with a byte that is not UTF-8."""
    path = parquet(tmp_path, query_id=Q, doc_id=D, score=[1.0, 2.0])
    path.write_bytes(path.read_bytes().replace(b"\x18\x05score", b"\x18\x05\x80core"))
    return path


def non_utf8_text(tmp_path: Path) -> Path:
    """A Parquet string column holding bytes that are not UTF-8 (Arrow does not check)."""
    offsets = pa.py_buffer(np.array([0, 2, 4], np.int32).tobytes())
    text = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"d1\xff\xfe")])
    return parquet(tmp_path, query_id=Q, doc_id=text, score=[1.0, 2.0])


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (non_utf8_name, "input: has a column name that is not UTF-8"),
        (non_utf8_text, "input: doc_id: holds text that is not UTF-8"),
    ],
)
def test_parquet_text_that_is_not_utf8_is_refused(tmp_path, make, expected):
    with pytest.raises(InputError) as raised:
        read_run(make(tmp_path))
    assert str(raised.value).replace(str(tmp_path) + "/", "") == expected


AMBIGUOUS = (
    "ambiguous: the line separates fields by both tabs and spaces, so {value} may be one "
    "value: {spaces} whitespace-separated fields for {name}, {tabs} tab-separated; refused "
    "rather than guessed; accepted: "
)


@pytest.mark.parametrize(
    ("reader", "content", "where", "value", "counts"),
    [
        # BEIR qrels without their header, a doc id holding a space: not TREC's 4 fields.
        (read_qrels, "q1\td1 x\t1\n", "1: doc_id", "'d1 x'", (4, 3)),
        (read_qrels, "q1\t0\td1\t1\nq1\t0\tdoc a\t1\n", "2: relevance", "'doc a'", (5, 4)),
        (read_qrels, "q1 0 d1 1\nq 1\t0\td2\t1\n", "2: iteration", "'q 1'", (5, 4)),
        (read_run, "q1 Q0 d1 1\t2.5 t\n", "1: iteration", "'q1 Q0 d1 1'", (6, 2)),
        (read_run, "q1\tQ0\td1\t1\t2.5\tmy  tag\n", "1: tag", "'my  tag'", (7, 6)),
    ],
)
def test_a_line_that_splits_otherwise_at_tabs_is_ambiguous(
    tmp_path, reader, content, where, value, counts
):
    name, accepted = (
        ("a TREC run", RUN_FORMATS) if reader is read_run else ("TREC qrels", QRELS_FORMATS)
    )
    spaces, tabs = counts
    assert refused(tmp_path, reader, content) == (
        f"input:{where}: "
        + AMBIGUOUS.format(value=value, spaces=spaces, name=name, tabs=tabs)
        + accepted
    )


def test_a_line_of_the_wrong_shape_before_it_is_named_first(tmp_path):
    assert refused(tmp_path, read_qrels, "q1 0 d1\nq1\td1 x\t1\n") == (
        "input:1: " + QRELS_COUNT.format(n=3) + QRELS_FORMATS
    )


def test_eval_refuses_headerless_beir_qrels_instead_of_scoring_them(tmp_path, capsys):
    """Issue 24: read as TREC qrels this judged doc `x` relevant and scored nDCG 1.0."""
    from rageval_pipeline.cli import main

    qrels, run = tmp_path / "qrels.tsv", tmp_path / "run.txt"
    qrels.write_text("q1\td1 x\t1\n")
    run.write_text("q1 Q0 x 1 1.0 t\n")
    assert main(["eval", str(qrels), str(run), "-m", "nDCG@10"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        f"error: {qrels}:1: doc_id: "
        + AMBIGUOUS.format(value="'d1 x'", spaces=4, name="TREC qrels", tabs=3)
        + QRELS_FORMATS
        + "\n",
    )
