"""BM25 over chunks with bm25s: Lucene scoring, stemming, stopwords, ties by id, edge queries."""

from __future__ import annotations

import os
import subprocess
import sys

import bm25s
import numpy as np
import pandas as pd
import pytest
import Stemmer

from rageval_pipeline.core.retrieval.bm25 import BM25Index

DOCS = {
    "espresso:chunk:0": "Descaling the espresso machine removes limescale from the boiler.",
    "grinder:chunk:0": "Burr grinders crush beans evenly; blade grinders chop them.",
    "kettle:chunk:0": "Descale a kettle with citric acid and rinse twice.",
    "twin-a:chunk:0": "Milk frothing needs cold whole milk.",
    "twin-b:chunk:0": "Milk frothing needs cold whole milk.",
}


@pytest.fixture
def chunks() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "chunk_id": list(DOCS),
            "doc_id": [c.split(":chunk:")[0] for c in DOCS],
            "title": "",
            "text": list(DOCS.values()),
        }
    )


def test_scores_equal_bm25s_and_stemming_matches_word_forms(chunks):
    index = BM25Index.build(chunks, k1=1.2, b=0.75)
    hits = index.search("descaling machines", 5)
    assert [h.doc_id for h in hits] == ["espresso:chunk:0", "kettle:chunk:0"]
    assert hits[1].source_id == "kettle"
    stemmer = Stemmer.Stemmer("english")
    reference = bm25s.BM25(k1=1.2, b=0.75)
    reference.index(bm25s.tokenize(list(DOCS.values()), stopwords="en", stemmer=stemmer))
    query = bm25s.tokenize(
        ["descaling machines"], stopwords="en", stemmer=stemmer, return_ids=False
    )
    expected = reference.get_scores(query[0])
    for hit in hits:
        assert hit.score == pytest.approx(float(expected[list(DOCS).index(hit.doc_id)]))


def test_identical_documents_tie_and_are_ordered_by_id_descending(chunks):
    hits = BM25Index.build(chunks).search("cold milk", 5)
    assert [h.doc_id for h in hits] == ["twin-b:chunk:0", "twin-a:chunk:0"]
    assert hits[0].score == hits[1].score


@pytest.mark.parametrize("query", ["", "   ", "the and of"])
def test_empty_or_stopword_only_queries_return_nothing(chunks, query):
    assert BM25Index.build(chunks).search(query, 10) == []


def test_saved_index_searches_identically(chunks, tmp_path):
    index = BM25Index.build(chunks)
    index.save(tmp_path / "idx")
    loaded = BM25Index.load(tmp_path / "idx")
    for query in ("descale", "grinder beans", "milk"):
        assert loaded.search(query, 3) == index.search(query, 3)
    assert np.array_equal(loaded.ids, index.ids)


def test_the_same_chunks_give_the_same_index_files_in_every_process(tmp_path):
    """Processes hash strings differently (PYTHONHASHSEED); the saved index must not show it."""
    script = (
        "import sys, pandas as pd\n"
        "from rageval_pipeline.core.retrieval.bm25 import BM25Index\n"
        f"docs = {DOCS!r}\n"
        "chunks = pd.DataFrame({'chunk_id': list(docs), 'doc_id': list(docs), 'title': '',"
        " 'text': list(docs.values())})\n"
        "BM25Index.build(chunks).save(__import__('pathlib').Path(sys.argv[1]))\n"
    )
    files = []
    for seed in ("1", "2", "3"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", script, str(out)], env=env, check=True)
        files.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert files[0] == files[1] == files[2]


@pytest.mark.parametrize("keep", [0, 40, -1])  # emptied, cut to 40 bytes, one byte short
def test_an_index_cut_short_is_refused_asking_for_a_rebuild(chunks, tmp_path, keep):
    from rageval_pipeline.core.retrieval.base import REBUILD_INDEX
    from rageval_pipeline.core.storage.warehouse import StorageError

    BM25Index.build(chunks).save(tmp_path / "index")
    ids = tmp_path / "index" / "ids.json"
    whole = ids.read_bytes()
    ids.write_bytes(whole[:keep])
    with pytest.raises(StorageError) as err:
        BM25Index.load(tmp_path / "index")
    assert str(err.value) == (
        f"{ids}: truncated or altered ({len(whole[:keep])} of {len(whole)} bytes): {REBUILD_INDEX}"
    )
