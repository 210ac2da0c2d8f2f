"""Readers and writers: formats told apart by content, precise errors, lossless round trips."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.formats import read_qrels, read_run, write_trec_run

FIXTURES = Path(__file__).parent / "fixtures" / "measures"
JUDGMENTS = [("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d3", 0), ("q2", "d9", 1), ("q3", "d5", 0)]


def judgments(frame: pd.DataFrame) -> list[tuple[str, str, int]]:
    return [
        (q, d, int(r))
        for q, d, r in frame[["query_id", "doc_id", "relevance"]].itertuples(index=False)
    ]


@pytest.mark.parametrize("name", ["qrels.trec", "qrels.tsv"])
def test_trec_and_beir_qrels_read_to_the_same_table(name):
    qrels = read_qrels(FIXTURES / name, split="test")
    assert list(qrels.columns) == tables.QRELS.names
    assert judgments(qrels) == JUDGMENTS
    assert set(qrels["split"]) == {"test"} and set(qrels["level"]) == {"document"}


def test_qrels_format_comes_from_the_content_not_the_name(tmp_path):
    beir_named_trec = tmp_path / "qrels.trec"  # BEIR content behind a misleading name
    shutil.copy(FIXTURES / "qrels.tsv", beir_named_trec)
    assert judgments(read_qrels(beir_named_trec)) == JUDGMENTS


def test_parquet_qrels_and_runs(tmp_path):
    qrels = pd.DataFrame(JUDGMENTS, columns=["query_id", "doc_id", "relevance"])
    qrels.to_parquet(tmp_path / "qrels.bin")
    assert judgments(read_qrels(tmp_path / "qrels.bin", split="dev")) == JUDGMENTS
    run = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2"],
            "doc_id": ["a:0", "b:0", None],
            "source_id": ["a", "b", None],
            "score": [0.5, 0.9, None],
            "latency_ms": [4.0, 4.0, 2.5],
        }
    )
    run.to_parquet(tmp_path / "run.bin")
    read = read_run(tmp_path / "run.bin")
    assert list(read.columns) == tables.RUN.names
    assert list(read["doc_id"].iloc[:2]) == ["b:0", "a:0"]  # re-ranked by score
    assert list(read["source_id"].iloc[:2]) == ["b", "a"]
    assert read["doc_id"].isna().sum() == 1 and read["latency_ms"].iloc[2] == 2.5


def test_trec_run_is_re_ranked_and_shaped_like_run():
    run = read_run(FIXTURES / "run_a.trec")
    assert list(run.columns) == tables.RUN.names
    q1 = run[run["query_id"] == "q1"]
    # d1 and d2 tie at 1.5: trec_eval order puts d2 first, whatever the file's ranks say.
    assert list(q1["doc_id"]) == ["d3", "d2", "d1", "d4"]
    assert list(q1["rank"]) == [1, 2, 3, 4]
    assert (run["source_id"] == run["doc_id"]).all() and run["latency_ms"].isna().all()


@pytest.mark.parametrize(
    ("name", "reader", "line", "field", "words"),
    [
        ("bad_score.trec", read_run, 2, "score", "'high' is not a finite number"),
        ("dup_doc.trec", read_run, 3, "doc_id", "'d1' again (first on line 1)"),
        ("bad_fields.qrels", read_qrels, 2, None, "found 3 whitespace-separated fields"),
        ("bad_label.tsv", read_qrels, 3, "relevance", "'one' is not an integer"),
    ],
)
def test_bad_lines_name_file_line_and_field(name, reader, line, field, words):
    with pytest.raises(InputError) as raised:
        reader(FIXTURES / name)
    error = raised.value
    assert (error.path, error.line, error.field) == (str(FIXTURES / name), line, field)
    assert words in error.problem
    assert "\n" not in str(error)


def test_unreadable_inputs(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_run(tmp_path / "missing.trec")
    (tmp_path / "empty").write_text("\n\n")
    with pytest.raises(InputError, match="no judgments"):
        read_qrels(tmp_path / "empty")
    (tmp_path / "latin1").write_bytes(b"q1 0 d1 1\nq1 0 caf\xe9 1\n")
    with pytest.raises(InputError) as raised:
        read_qrels(tmp_path / "latin1")
    assert raised.value.line == 2
    (tmp_path / "nan.trec").write_text("q1 Q0 d1 1 nan t\n")
    with pytest.raises(InputError, match="finite"):
        read_run(tmp_path / "nan.trec")
    pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"]}).to_parquet(tmp_path / "noscore.parquet")
    with pytest.raises(InputError) as raised:
        read_run(tmp_path / "noscore.parquet")
    assert raised.value.field == "score"


def test_write_then_read_gives_the_same_run(tmp_path):
    run = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q2"],
            "doc_id": ["a", "b", "c", None],
            "source_id": ["a", "b", "c", None],
            "score": [0.1 + 0.2, 1 / 3, 1 / 3, None],  # needs full precision to survive
            "latency_ms": [1.0, 1.0, 1.0, 2.0],
        }
    )
    path = tmp_path / "run.trec"
    write_trec_run(run, path, tag="bm25")
    lines = path.read_text().splitlines()
    assert lines[0].split() == ["q1", "Q0", "c", "1", repr(1 / 3), "bm25"]
    assert len(lines) == 3  # the placeholder is not a result
    back = read_run(path)
    assert list(back["doc_id"]) == ["c", "b", "a"]
    assert list(back["score"]) == [1 / 3, 1 / 3, 0.1 + 0.2]


def test_write_rejects_ids_that_would_break_the_format(tmp_path):
    run = pd.DataFrame({"query_id": ["q1"], "doc_id": ["two words"], "score": [1.0]})
    with pytest.raises(InputError) as raised:
        write_trec_run(run, tmp_path / "x.trec", tag="t")
    assert raised.value.field == "doc_id"
    with pytest.raises(InputError):
        write_trec_run(run.assign(doc_id="ok"), tmp_path / "x.trec", tag="my tag")
