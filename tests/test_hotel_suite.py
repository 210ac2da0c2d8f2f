"""Structural checks of golden suite 2 (hotel, seed 001), independent of the suite loader.

The suite is read with json and the reference chunking (fixed windows of 200 whitespace tokens
sharing 40, as character extents `chunk_extents`; JSON documents indexed as canonical
`json.dumps`), so these tests keep guarding the data even if the loader changes. Entities are
judged by evidence spans (issue 33): each judged entity's whole text as the judged region,
with the quoted evidence inside it.
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
from tests.nugget_record import renugget

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
def judged(suite: dict, texts: dict[str, str]) -> dict[str, dict[str, int]]:
    """Query id -> judged entity -> its judged grade: the highest grade of the query's spans in
    it (its evidence), 0 for an entity read and holding none (its hashes checked)."""
    out: dict[str, dict[str, int]] = {}
    for q in suite["queries"]:
        out[q["id"]] = {}
        for span in q.get("spans", []):
            piece = texts[span["doc"]][span["start"] : span["end"]].encode("utf-8")
            assert hashlib.sha256(piece).hexdigest() == span["sha256"], (q["id"], span)
            out[q["id"]][span["doc"]] = max(out[q["id"]].get(span["doc"], 0), span["grade"])
    return out


@pytest.fixture(scope="module")
def primary(suite: dict) -> dict[str, dict]:
    """Query id -> its span marked primary (the evidence that should rank first)."""
    return {
        q["id"]: span
        for q in suite["queries"]
        for span in q.get("spans", [])
        if span.get("primary")
    }


def _top_1(span: dict, texts: dict[str, str]) -> int:
    """The reference chunk (fixed windows of 200 tokens sharing 40) holding most of a span."""
    config = ChunkingConfig(strategy="fixed", size=200, overlap=40)
    extents = chunk_extents(texts[span["doc"]], config)
    shared = [min(b, span["end"]) - max(a, span["start"]) for a, b in extents]
    return shared.index(max(shared))


def test_header(suite: dict) -> None:
    assert suite["version"] == "1.1"
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


def test_seed_queries_present(
    suite: dict, judged: dict[str, dict[str, int]], primary: dict[str, dict], texts: dict
) -> None:
    by_id = {q["id"]: q for q in suite["queries"]}
    for qid, (text, entity) in SEED_QUERIES.items():
        assert by_id[qid]["query"] == text
        assert primary[qid]["doc"] == entity
        assert judged[qid][entity] == 3
        assert _top_1(primary[qid], texts) == 0
    assert judged["q001"]["entity-terms-of-service"] >= 1


def test_edge_queries_have_no_answer(suite: dict, judged: dict[str, dict[str, int]]) -> None:
    """Edge queries (seed 003: empty, nonsensical, out of scope) grade nothing above 0."""
    edge = [q for q in suite["queries"] if q["query_type"] == "edge"]
    assert any(q["query"] == "" for q in edge), "needs the empty query"
    assert sum(q["query"].strip() != "" for q in edge) >= 2, "needs out-of-scope queries"
    for q in edge:
        assert all(g == 0 for g in judged[q["id"]].values()), q["id"]
        assert not any(s.get("primary") for s in q.get("spans", [])), q["id"]


def test_judgments_are_evidence_spans(suite: dict, texts: dict[str, str]) -> None:
    """Each judged entity is one span over its whole text (grade 0: read, no evidence) with
    its evidence spans inside it; no whole-entity judgments, no top_1_span (the primary
    evidence span plays its part)."""
    for q in suite["queries"]:
        assert not {"judgments", "primary", "top_1_span", "top_1_chunk"} & set(q), q["id"]
        if q["query_type"] != "edge":
            assert q["spans"], q["id"]
        whole = {}
        for span in q.get("spans", []):
            text = texts[span["doc"]]
            if (span["start"], span["end"]) == (len(text) - len(text.lstrip()), len(text.rstrip())):
                whole[span["doc"]] = span["grade"]
        for span in q.get("spans", []):
            assert span["doc"] in whole, f"{q['id']}: evidence outside a judged entity"
            assert type(span["grade"]) is int and 0 <= span["grade"] <= 3, q["id"]
            if span["grade"] and whole[span["doc"]] == 0:
                assert span["end"] - span["start"] < len(texts[span["doc"]]), q["id"]


def test_primary_is_evidence_with_the_maximal_grade(
    suite: dict, judged: dict[str, dict[str, int]], primary: dict[str, dict]
) -> None:
    for q in _answerable(suite):
        grades = judged[q["id"]]
        span = primary[q["id"]]
        assert span["grade"] == max(grades.values()), f"{q['id']}: primary not max"
        assert span["grade"] >= 2, f"{q['id']}: primary should at least be relevant"


def test_relevance_is_spread_and_distractors_are_judged(
    suite: dict, judged: dict[str, dict[str, int]]
) -> None:
    queries = _answerable(suite)
    grades = Counter(g for q in queries for g in judged[q["id"]].values())
    assert all(grades[g] > 0 for g in range(4)), grades
    several = sum(sum(g >= 2 for g in judged[q["id"]].values()) >= 2 for q in queries)
    assert several >= len(queries) / 2, "most queries should have several relevant entities"
    with_zero = sum(any(g == 0 for g in judged[q["id"]].values()) for q in queries)
    assert with_zero >= len(queries) / 2, "most queries should judge a tempting distractor 0"


def test_long_documents_hold_some_answers(
    suite: dict, texts: dict[str, str], primary: dict[str, dict]
) -> None:
    """Hard queries include answers buried in long entities (primary evidence past the first
    reference chunk)."""
    long_ids = {doc_id for doc_id, text in texts.items() if len(text.split()) >= 2000}
    buried = [
        q["id"]
        for q in _answerable(suite)
        if primary[q["id"]]["doc"] in long_ids and _top_1(primary[q["id"]], texts) > 0
    ]
    assert len(buried) >= 2, buried


def test_judged_entities_are_the_final_readings_of_the_record(
    judged: dict[str, dict[str, int]],
) -> None:
    """Each entity's judged grade is its final reading in agreement/round2 (first pass, its
    re-quoted rows, the third reading where the passes disagreed) except where the nugget-level
    re-judging (agreement/nuggets) graded its nuggets again; an entity no reading names keeps
    grade 0 (scripts/evidence_judging.py build)."""
    record = SUITE_DIR / "agreement" / "round2"
    final = {}
    for part in ("first_pass", "requotes", "third_reading"):
        for line in (record / f"{part}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            final[row["query_id"], row["target"]] = row["grade"]
    grades = {(q, t): g for q, entities in judged.items() for t, g in entities.items()}
    again = renugget(SUITE_DIR)
    final = {key: g for key, g in final.items() if key not in again}
    assert {key: grades.get(key, 0) for key in final} == final
    assert all(g == 0 for key, g in grades.items() if key not in final and key not in again)
