"""BEIR folders into typed tables, with errors that name file, line and field."""

from __future__ import annotations

import json

import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.suites import loaders


def test_beir_mini_loads_into_the_shared_schemas(beir_mini):
    dataset = loaders.load_dataset(beir_mini)
    assert list(dataset.corpus.columns) == tables.CORPUS.names
    assert list(dataset.queries.columns) == tables.QUERIES.names
    assert list(dataset.qrels.columns) == tables.QRELS.names
    corpus_lines = (beir_mini / "corpus.jsonl").read_text().splitlines()
    assert len(dataset.corpus) == len(corpus_lines)
    first = json.loads(corpus_lines[0])
    row = dataset.corpus.iloc[0]
    assert (row.doc_id, row.title, row.text) == (first["_id"], first["title"], first["text"])
    assert row.url == first["metadata"]["url"]
    # test.tsv is BEIR's 3-column form, dev.tsv TREC's 4-column form: both read by content.
    assert set(dataset.qrels["split"]) == {"test", "dev"}
    dev_lines = (beir_mini / "qrels" / "dev.tsv").read_text().split("\n")
    dev = dataset.qrels[dataset.qrels["split"] == "dev"]
    assert len(dev) == len([line for line in dev_lines if line.strip()])
    qid, _, doc, grade = dev_lines[0].split()
    assert dev.iloc[0][["query_id", "doc_id", "relevance"]].tolist() == [qid, doc, int(grade)]
    assert dataset.reference_chunking is None


def test_query_attributes_come_from_metadata(beir_mini):
    queries = loaders.read_queries(beir_mini / "queries.jsonl")
    first = json.loads((beir_mini / "queries.jsonl").read_text().splitlines()[0])
    assert queries.iloc[0]["intent"] == first["metadata"]["intent"]
    assert queries.iloc[0]["difficulty"] == first["metadata"]["difficulty"]


def test_missing_url_gets_a_stable_dataset_uri(tmp_path, beir_mini):
    folder = tmp_path / "x"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": "t"}) + "\n")
    corpus = loaders.load_part(folder, "corpus", dataset="x")
    assert corpus["url"].tolist() == ["rageval://x/d1"]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"_id": "d1", "text": "a"}', "{not json"], r"corpus.jsonl:2: invalid JSON"),
        (['{"_id": "d1", "text": "a"}', '{"_id": "d2"}'], r"corpus.jsonl:2: text: missing"),
        (['{"_id": "d1", "text": 5}'], r"corpus.jsonl:1: text: expected a string, got int"),
        (
            ['{"_id": "d1", "text": "a"}', '{"_id": "d1", "text": "b"}'],
            r"corpus.jsonl:2: _id: duplicate _id 'd1' \(first on line 1\)",
        ),
        (["[1, 2]"], r"corpus.jsonl:1: expected a JSON object"),
    ],
)
def test_bad_corpus_lines_name_file_line_and_field(tmp_path, lines, expected):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=expected):
        loaders.read_corpus(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(InputError, match=r"queries.jsonl: no such file"):
        loaders.read_queries(tmp_path / "queries.jsonl")


def test_judged_queries_keep_one_split_in_id_order(beir_mini):
    dataset = loaders.load_dataset(beir_mini)
    test = loaders.judged_queries(dataset.queries, dataset.qrels, "test")
    dev = loaders.judged_queries(dataset.queries, dataset.qrels, "dev")
    test_ids = {
        line.split("\t")[0]
        for line in (beir_mini / "qrels" / "test.tsv").read_text().splitlines()[1:]
    }
    assert set(test["query_id"]) == test_ids
    assert test["query_id"].tolist() == sorted(test_ids)
    assert not set(test["query_id"]) & set(dev["query_id"])
