"""Structural checks of golden suite 2 (hotel, seed 001), independent of the suite loader.

The suite is read with json and the reference chunking (fixed windows of 200 whitespace tokens
sharing 40, as character extents `chunk_extents`; JSON documents indexed as canonical
`json.dumps`), so these tests keep guarding the data even if the loader changes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.suites.spans import chunk_extents

SUITE_DIR = Path(__file__).parents[1] / "data/suites/hotel"
TYPES = {"knowledge_artifact", "communication_signal", "interaction_event"}
FORMATS = {"markdown", "plain", "json"}
INTENTS = {"factual", "comparative", "troubleshooting", "sentiment"}
DIFFICULTIES = {"easy", "medium", "hard"}
QUERY_TYPES = {"specific", "broad", "paraphrase", "edge"}
SEED_ENTITIES = {"entity-refund-policy", "entity-amenities-list", "entity-terms-of-service"}
SEED_QUERIES = {
    "q001": ("What is the refund policy if I cancel my reservation?", "entity-refund-policy"),
    "q002": ("Do you have a swimming pool?", "entity-amenities-list"),
}
CHUNK_ID = re.compile(r"^(?P<doc>.+):chunk:(?P<n>\d+)$")


def _text(doc: dict) -> str:
    """The indexed text of a document under the suite format."""
    if "content_path" in doc:
        return (SUITE_DIR / doc["content_path"]).read_text(encoding="utf-8")
    if doc["format"] == "json" and not isinstance(doc["content"], str):
        return json.dumps(doc["content"], indent=2, sort_keys=True, ensure_ascii=False)
    return doc["content"]


@pytest.fixture(scope="module")
def suite() -> dict:
    return json.loads((SUITE_DIR / "suite.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def texts(suite: dict) -> dict[str, str]:
    return {doc["id"]: _text(doc) for doc in suite["documents"]}


@pytest.fixture(scope="module")
def top_1(suite: dict, texts: dict[str, str]) -> dict[str, str]:
    """Query id -> the reference chunk its top_1_span is (its hash checked against the text)."""
    config = ChunkingConfig(strategy="fixed", size=200, overlap=40)
    out = {}
    for q in suite["queries"]:
        if (span := q.get("top_1_span")) is not None:
            text = texts[span["doc"]]
            piece = text[span["start"] : span["end"]].encode("utf-8")
            assert hashlib.sha256(piece).hexdigest() == span["sha256"], q["id"]
            extents = chunk_extents(text, config)
            assert (span["start"], span["end"]) in extents, f"{q['id']}: not a reference chunk"
            index = extents.index((span["start"], span["end"]))
            out[q["id"]] = f"{span['doc']}:chunk:{index}"
    return out


def test_header(suite: dict) -> None:
    assert suite["version"] == "1.0"
    assert suite["name"] == "hotel"
    assert suite["match"] == "exact"
    assert suite["description"].strip()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", suite["created_at"])


def test_document_ids_unique_and_seed_entities_present(suite: dict) -> None:
    ids = [d["id"] for d in suite["documents"]]
    assert len(ids) >= 50
    assert len(ids) == len(set(ids)), "document ids must be unique"
    assert set(ids) >= SEED_ENTITIES
    for doc_id in ids:
        assert not CHUNK_ID.match(doc_id), f"{doc_id}: a document id must not name a chunk"


def test_documents_are_well_formed(suite: dict) -> None:
    for doc in suite["documents"]:
        assert doc["type"] in TYPES, doc["id"]
        assert doc["format"] in FORMATS, doc["id"]
        assert doc["title"].strip(), doc["id"]
        assert ("content" in doc) != ("content_path" in doc), f"{doc['id']}: exactly one source"
        if "content_path" in doc:
            assert (SUITE_DIR / doc["content_path"]).is_file(), doc["id"]
        else:
            assert doc["format"] == "json", f"{doc['id']}: inline content is kept for json only"


def test_every_document_file_is_referenced(suite: dict) -> None:
    files = {p.relative_to(SUITE_DIR).as_posix() for p in (SUITE_DIR / "documents").iterdir()}
    referenced = [d["content_path"] for d in suite["documents"] if "content_path" in d]
    assert len(referenced) == len(set(referenced)), "a file is referenced twice"
    assert set(referenced) == files, "every file in documents/ is referenced exactly once"


def test_all_types_and_formats_present(suite: dict) -> None:
    types = Counter(d["type"] for d in suite["documents"])
    formats = Counter(d["format"] for d in suite["documents"])
    assert set(types) == TYPES
    assert set(formats) == FORMATS
    assert formats["markdown"] >= 8 and formats["plain"] >= 8 and formats["json"] >= 6


def test_lengths_span_100_to_5000_words(texts: dict[str, str]) -> None:
    words = {doc_id: len(text.split()) for doc_id, text in texts.items()}
    assert all(100 <= n <= 5000 for n in words.values()), {k: n for k, n in words.items()}
    assert min(words.values()) <= 150, "needs a short document (100-150 words)"
    assert max(words.values()) >= 2000, "needs a long document (>= 2000 words)"
    long_docs = [doc_id for doc_id, n in words.items() if n >= 2000]
    assert len(long_docs) >= 3, f"needs at least 3 long documents, got {long_docs}"
    short = sum(n <= 600 for n in words.values())
    assert short > len(words) / 2, "most documents should be 100-600 words"


def test_json_documents_are_structured(suite: dict) -> None:
    for doc in suite["documents"]:
        if doc["format"] == "json" and "content" in doc:
            assert isinstance(doc["content"], (dict, list)), doc["id"]


def _answerable(suite: dict) -> list[dict]:
    """Queries with an answer in the corpus: every query but the edge ones."""
    return [q for q in suite["queries"] if q["query_type"] != "edge"]


def test_queries_count_ids_and_labels(suite: dict) -> None:
    queries = suite["queries"]
    assert len(queries) >= 50
    ids = [q["id"] for q in queries]
    assert len(ids) == len(set(ids)), "query ids must be unique"
    texts = [q["query"].strip().lower() for q in queries]
    assert len(texts) == len(set(texts)), "query texts must be unique"
    for q in _answerable(suite):
        assert q["query"].strip(), q["id"]
    for q in queries:
        assert q["intent"] in INTENTS, q["id"]
        assert q["difficulty"] in DIFFICULTIES, q["id"]
        assert q["query_type"] in QUERY_TYPES, q["id"]
        assert q["category"].strip(), q["id"]
    assert {q["intent"] for q in queries} == INTENTS
    assert {q["difficulty"] for q in queries} == DIFFICULTIES


def test_seed_queries_present(suite: dict, top_1: dict[str, str]) -> None:
    by_id = {q["id"]: q for q in suite["queries"]}
    for qid, (text, primary) in SEED_QUERIES.items():
        assert by_id[qid]["query"] == text
        assert by_id[qid]["primary"] == primary
        assert by_id[qid]["judgments"][primary] == 3
        assert top_1[qid] == f"{primary}:chunk:0"
    assert by_id["q001"]["judgments"]["entity-terms-of-service"] == 1


def test_edge_queries_have_no_answer(suite: dict) -> None:
    """Edge queries (seed 003: empty, nonsensical, out of scope) grade nothing above 0."""
    edge = [q for q in suite["queries"] if q["query_type"] == "edge"]
    assert any(q["query"] == "" for q in edge), "needs the empty query"
    assert sum(q["query"].strip() != "" for q in edge) >= 2, "needs out-of-scope queries"
    for q in edge:
        assert all(g == 0 for g in q["judgments"].values()), q["id"]
        assert "primary" not in q and "top_1_span" not in q, q["id"]


def test_grades_are_integers_0_to_3(suite: dict) -> None:
    for q in _answerable(suite):
        assert q["judgments"], q["id"]
    for q in suite["queries"]:
        for target, grade in q["judgments"].items():
            assert type(grade) is int and 0 <= grade <= 3, (q["id"], target, grade)


def test_every_judged_id_is_a_document(suite: dict) -> None:
    ids = {d["id"] for d in suite["documents"]}
    missing = [(q["id"], t) for q in suite["queries"] for t in q["judgments"] if t not in ids]
    assert not missing, f"judged ids that are not documents: {missing}"


def test_primary_is_judged_with_the_maximal_grade(suite: dict) -> None:
    for q in _answerable(suite):
        judgments = q["judgments"]
        assert q["primary"] in judgments, f"{q['id']}: primary is not judged"
        assert judgments[q["primary"]] == max(judgments.values()), f"{q['id']}: primary not max"
        assert judgments[q["primary"]] >= 2, f"{q['id']}: primary should at least be relevant"


def test_top_1_chunk_exists_and_belongs_to_primary(suite: dict, top_1: dict[str, str]) -> None:
    assert not [q["id"] for q in suite["queries"] if "top_1_chunk" in q]  # converted to spans
    for q in _answerable(suite):
        chunk = top_1[q["id"]]
        match = CHUNK_ID.match(chunk)
        assert match, f"{q['id']}: {chunk!r} is not a chunk id"
        assert match["doc"] == q["primary"], f"{q['id']}: top_1_chunk is not in the primary"


def test_relevance_is_spread_and_distractors_are_judged(suite: dict) -> None:
    queries = _answerable(suite)
    grades = Counter(g for q in queries for g in q["judgments"].values())
    assert all(grades[g] > 0 for g in range(4)), grades
    several = sum(sum(g >= 2 for g in q["judgments"].values()) >= 2 for q in queries)
    assert several >= len(queries) / 2, "most queries should have several relevant entities"
    with_zero = sum(any(g == 0 for g in q["judgments"].values()) for q in queries)
    assert with_zero >= len(queries) / 2, "most queries should judge a tempting distractor 0"


def test_long_documents_hold_some_answers(
    suite: dict, texts: dict[str, str], top_1: dict[str, str]
) -> None:
    """Hard queries include answers buried in long entities (top_1_chunk past chunk 0)."""
    long_ids = {doc_id for doc_id, text in texts.items() if len(text.split()) >= 2000}
    buried = [
        q["id"]
        for q in _answerable(suite)
        if q["primary"] in long_ids and int(CHUNK_ID.match(top_1[q["id"]])["n"]) > 0
    ]
    assert len(buried) >= 2, buried
