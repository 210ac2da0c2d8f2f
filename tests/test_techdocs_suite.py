"""Structural checks of golden suite 1 (techdocs, seed 000), independent of the suite loader.

The suite is read with json and the reference chunking (`split_text` with markdown_headers),
so these tests keep guarding the data even if the loader changes. Its judgments are evidence
spans: each is checked against its document's text by hash, and named by the reference chunk
whose extent it is (`chunk_extents`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rageval_pipeline.core.suites.chunking import ChunkingConfig, split_text
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import suite_tables
from rageval_pipeline.core.suites.spans import chunk_extents
from tests.nugget_record import renugget

SUITE_DIR = Path(__file__).parents[1] / "data/suites/techdocs"
# Seed 000's sample queries; their difficulty is measured (`rageval pool difficulty`), not the
# seed's impression (Q001 and Q042 measure medium, Q015 easy).
SAMPLE_QUERIES = {
    "Q001": ("How do I configure OAuth authentication?", "procedural"),
    "Q015": ("What is the difference between chunking strategies?", "comparative"),
    "Q042": ("Why might search results be inaccurate after re-indexing?", "troubleshoot"),
}
CATEGORY_COUNTS = {
    "factual": 15,
    "conceptual": 12,
    "procedural": 10,
    "comparative": 8,
    "troubleshoot": 5,
}
# Measured (`rageval pool difficulty`): the seed's split, kept by writing and choosing queries
# (data/suites/techdocs/README.md, "Difficulty: measured, not felt").
DIFFICULTY_COUNTS = {"easy": 20, "medium": 20, "hard": 10}
QUERY_TYPES = {"specific", "broad", "paraphrase", "edge"}


@pytest.fixture(scope="module")
def suite() -> dict:
    return json.loads((SUITE_DIR / "suite.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def chunks(suite: dict) -> dict[str, str]:
    """Every chunk id of the reference chunking -> its text."""
    assert suite["chunking"] == {"strategy": "markdown_headers"}
    config = ChunkingConfig(strategy="markdown_headers")
    out = {}
    for doc in suite["documents"]:
        text = (SUITE_DIR / doc["content_path"]).read_text(encoding="utf-8")
        for index, chunk in enumerate(split_text(text, config)):
            out[f"{doc['id']}:chunk:{index}"] = chunk
    return out


@pytest.fixture(scope="module")
def extents(suite: dict) -> dict[str, tuple[str, list[tuple[int, int]]]]:
    """Document id -> (text, the character extent of each reference chunk)."""
    config = ChunkingConfig(strategy="markdown_headers")
    out = {}
    for doc in suite["documents"]:
        text = (SUITE_DIR / doc["content_path"]).read_text(encoding="utf-8")
        out[doc["id"]] = (text, chunk_extents(text, config))
    return out


def _section(extents: dict, span: dict) -> str:
    """The reference chunk (section) holding a span whole; AssertionError when none does."""
    text, chunks = extents[span["doc"]]
    piece = text[span["start"] : span["end"]].encode("utf-8")
    assert hashlib.sha256(piece).hexdigest() == span["sha256"], span
    inside = [n for n, (a, b) in enumerate(chunks) if a <= span["start"] and span["end"] <= b]
    assert len(inside) == 1, f"span {span} is not inside one section"
    return f"{span['doc']}:chunk:{inside[0]}"


@pytest.fixture(scope="module")
def judged(suite: dict, extents: dict) -> dict[str, dict[str, int]]:
    """Query id -> judged section -> its judged grade: the highest grade of the query's spans
    inside it (its evidence), 0 for a judged region holding none. Read from the JSON alone."""
    out: dict[str, dict[str, int]] = {}
    for q in suite["queries"]:
        out[q["id"]] = {}
        for span in q.get("spans", []):
            section = _section(extents, span)
            out[q["id"]][section] = max(out[q["id"]].get(section, 0), span["grade"])
    return out


@pytest.fixture(scope="module")
def primary(suite: dict, extents: dict) -> dict[str, str]:
    """Query id -> the section of its span marked primary."""
    return {
        q["id"]: _section(extents, span)
        for q in suite["queries"]
        for span in q.get("spans", [])
        if span.get("primary")
    }


def test_judgments_are_spans(suite: dict) -> None:
    assert not [q["id"] for q in suite["queries"] if "judgments" in q or "primary" in q]


def test_header(suite: dict) -> None:
    assert suite["version"] == "1.1"
    assert suite["name"] == "techdocs"
    assert suite["match"] == "exact"
    assert suite["description"].strip()


def test_documents(suite: dict) -> None:
    docs = suite["documents"]
    assert len(docs) >= 20
    ids = [d["id"] for d in docs]
    assert len(ids) == len(set(ids)), "document ids must be unique"
    files = {p.name for p in (SUITE_DIR / "documents").glob("*.md")}
    assert {Path(d["content_path"]).name for d in docs} == files, "every file listed exactly once"
    for doc in docs:
        assert doc["content_path"] == f"documents/{doc['id']}.md"
        assert doc["type"] == "knowledge_artifact" and doc["format"] == "markdown"
        assert doc["title"].strip()
        text = (SUITE_DIR / doc["content_path"]).read_text(encoding="utf-8")
        assert text.startswith(f"# {doc['title']}\n"), f"{doc['id']}: first line is '# <title>'"
        words = len(text.split())
        assert 300 <= words <= 800, f"{doc['id']}: {words} words, expected 300-800"


def test_every_document_has_several_sections(chunks: dict[str, str], suite: dict) -> None:
    per_doc = Counter(cid.split(":chunk:")[0] for cid in chunks)
    for doc in suite["documents"]:
        assert per_doc[doc["id"]] >= 6, f"{doc['id']} has only {per_doc[doc['id']]} chunks"


def test_exactly_fifty_queries_with_unique_ids(suite: dict) -> None:
    # Replaced queries leave their ids unused: an id never names two different queries.
    ids = [q["id"] for q in suite["queries"]]
    assert len(ids) == 50
    assert len(set(ids)) == 50
    assert all(re.fullmatch(r"Q\d{3}", i) for i in ids)
    texts = [q["query"].strip().lower() for q in suite["queries"]]
    assert len(set(texts)) == 50, "query texts must be unique"


def test_category_and_difficulty_counts(suite: dict) -> None:
    queries = suite["queries"]
    assert dict(Counter(q["category"] for q in queries)) == CATEGORY_COUNTS
    assert dict(Counter(q["difficulty"] for q in queries)) == DIFFICULTY_COUNTS
    for q in queries:
        assert q["intent"] == q["category"], q["id"]
        assert q["query_type"] in QUERY_TYPES, q["id"]
        assert q["description"].strip(), q["id"]
        assert q["query"].strip() or q["query_type"] == "edge", q["id"]


def test_seed_sample_queries_are_present(suite: dict) -> None:
    by_id = {q["id"]: q for q in suite["queries"]}
    for qid, (text, category) in SAMPLE_QUERIES.items():
        q = by_id[qid]
        assert (q["query"], q["category"]) == (text, category)


def test_edge_queries_have_no_answer(suite: dict, judged: dict[str, dict[str, int]]) -> None:
    """Seed 003: `edge` is for empty, nonsensical or out-of-scope queries, nothing else."""
    edge = [q for q in suite["queries"] if q["query_type"] == "edge"]
    assert len(edge) >= 2 and any(not q["query"].strip() for q in edge)
    for q in edge:
        assert all(g == 0 for g in judged[q["id"]].values()), q["id"]


def test_grades_are_integers_0_to_3(suite: dict, judged: dict[str, dict[str, int]]) -> None:
    for q in suite["queries"]:
        for target, grade in judged[q["id"]].items():
            assert type(grade) is int and 0 <= grade <= 3, (q["id"], target, grade)


def test_every_query_has_two_relevant_targets_and_a_maximal_primary(
    suite: dict, judged: dict[str, dict[str, int]], primary: dict[str, str]
) -> None:
    for q in suite["queries"]:
        if q["query_type"] == "edge":
            continue
        judgments = judged[q["id"]]
        relevant = [t for t, g in judgments.items() if g >= 1]
        assert len(relevant) >= 2, f"{q['id']}: only {len(relevant)} targets with grade >= 1"
        best = primary[q["id"]]
        assert judgments[best] == max(judgments.values()), f"{q['id']}: primary not max"
        assert judgments[best] >= 2, f"{q['id']}: primary should at least be relevant"


def test_spans_are_judged_sections_and_the_evidence_inside_them(suite: dict, extents: dict) -> None:
    """Each judged section is one span over the whole section (grade 0: the judged region,
    read and holding no evidence), with its nuggets inside it (each with its own grade), or,
    when every sentence is evidence, one span over the whole section with the grade."""
    for q in suite["queries"]:
        regions: dict[str, list[int]] = {}
        for span in q.get("spans", []):
            regions.setdefault(_section(extents, span), []).append(span["grade"])
        for section, grades in regions.items():
            doc, n = section.rsplit(":chunk:", 1)
            whole = [
                s
                for s in q["spans"]
                if s["doc"] == doc and (s["start"], s["end"]) == extents[doc][1][int(n)]
            ]
            assert len(whole) == 1, f"{q['id']} {section}: no span over the whole section"
            if len(grades) > 1:
                assert whole[0]["grade"] == 0, f"{q['id']} {section}: region graded"


def test_reference_tables_are_the_judged_grades(
    suite: dict, judged: dict[str, dict[str, int]]
) -> None:
    """Under the reference chunking the derived grade of every section (the qrels the
    pipeline measures with, `core.suites.derived`) is its judged grade, and the judged grades
    are the final readings of agreement/round2 (first pass, its re-quoted rows, the third
    reading where the passes disagreed, a near-duplicate given its decided grade) except where
    the nugget-level re-judging (agreement/nuggets) graded its nuggets again; a section no
    reading names keeps grade 0."""
    qrels = suite_tables(load_suite(SUITE_DIR)).qrels
    derived = {(r.query_id, r.doc_id): r.relevance for r in qrels.itertuples()}
    assert derived == {(q, t): g for q, grades in judged.items() for t, g in grades.items()}
    record = SUITE_DIR / "agreement" / "round2"
    final = {}
    for part in ("first_pass", "requotes", "third_reading", "consistency"):
        for line in (record / f"{part}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            final[row["query_id"], row["target"]] = row["grade"]
    again = renugget(SUITE_DIR)

    def kept(key: tuple[str, str]) -> bool:  # a query dropped from the suite keeps its record
        return key[0] in judged and (key[0], key[1].rsplit(":chunk:", 1)[0]) not in again

    final = {k: g for k, g in final.items() if kept(k)}
    assert {k: derived.get(k, 0) for k in final} == final
    assert all(g == 0 for k, g in derived.items() if k not in final and kept(k))


def test_judged_chunks_are_sections_not_bare_titles(
    judged: dict[str, dict[str, int]], chunks: dict[str, str]
) -> None:
    """Relevant targets should be real sections; a '# Title' chunk judged 3 would be a slip."""
    for query, judgments in judged.items():
        for target, grade in judgments.items():
            if grade == 3:
                assert chunks[target].startswith("## "), (query, target)


def test_some_distractors_are_judged_zero(judged: dict[str, dict[str, int]]) -> None:
    grades = [judgments.values() for judgments in judged.values()]
    assert sum(g == 0 for judged in grades for g in judged) >= 50
    assert sum(any(g == 0 for g in judged) for judged in grades) >= 40
