"""Structural and sanity checks for the bundled BEIR-layout suite ``data/suites/beir-mini``.

The suite is read here with plain ``json``/``csv`` rather than the project's loader, so these
tests pin the on-disk format itself (the loader has its own tests).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

import bm25s
import pytest
import Stemmer

SUITE = Path(__file__).parents[1] / "data/suites/beir-mini"

DOC_RANGE = (36, 45)
DOC_WORDS = (60, 200)
TEST_QUERY_RANGE = (18, 24)
DEV_QUERY_RANGE = (6, 8)
INTENTS = {"factual", "procedural", "troubleshoot", "comparative", "conceptual"}
DIFFICULTIES = {"easy", "medium", "hard"}
URL_RE = re.compile(r"^https://example\.org/coffee/[a-z0-9]+(?:-[a-z0-9]+)*$")
TEST_HEADER = "query-id\tcorpus-id\tscore"


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path.name}:{lineno} is blank"
        obj = json.loads(line)
        assert isinstance(obj, dict), f"{path.name}:{lineno} is not a JSON object"
        rows.append(obj)
    return rows


@cache
def _corpus() -> tuple[dict, ...]:
    return tuple(_read_jsonl(SUITE / "corpus.jsonl"))


@cache
def _queries() -> tuple[dict, ...]:
    return tuple(_read_jsonl(SUITE / "queries.jsonl"))


@cache
def _test_qrels() -> tuple[tuple[str, str, int], ...]:
    lines = (SUITE / "qrels/test.tsv").read_text(encoding="utf-8").splitlines()
    assert lines and lines[0] == TEST_HEADER, f"bad header: {lines[:1]!r}"
    rows = []
    for lineno, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        assert len(fields) == 3, f"test.tsv:{lineno} has {len(fields)} tab fields: {line!r}"
        qid, did, score = fields
        assert re.fullmatch(r"-?\d+", score), f"test.tsv:{lineno} score {score!r}"
        rows.append((qid, did, int(score)))
    return tuple(rows)


@cache
def _dev_qrels() -> tuple[tuple[str, str, int], ...]:
    lines = (SUITE / "qrels/dev.tsv").read_text(encoding="utf-8").splitlines()
    rows = []
    for lineno, line in enumerate(lines, 1):
        assert "\t" not in line, f"dev.tsv:{lineno} must be space separated: {line!r}"
        fields = line.split(" ")
        assert len(fields) == 4, f"dev.tsv:{lineno} has {len(fields)} fields: {line!r}"
        qid, q0, did, score = fields
        assert q0 == "Q0", f"dev.tsv:{lineno} second column is {q0!r}, not 'Q0'"
        assert re.fullmatch(r"-?\d+", score), f"dev.tsv:{lineno} grade {score!r} (a header?)"
        rows.append((qid, did, int(score)))
    return tuple(rows)


def _split_ids(rows) -> set[str]:
    return {qid for qid, _, _ in rows}


def test_required_files_exist():
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/dev.tsv", "README.md"):
        assert (SUITE / name).is_file(), name


def test_corpus_records_have_beir_fields():
    for doc in _corpus():
        assert set(doc) == {"_id", "title", "text", "metadata"}, doc.get("_id")
        assert isinstance(doc["_id"], str) and doc["_id"].strip()
        assert isinstance(doc["title"], str) and doc["title"].strip(), doc["_id"]
        assert isinstance(doc["text"], str) and doc["text"].strip(), doc["_id"]
        assert set(doc["metadata"]) == {"url"}, doc["_id"]
        assert URL_RE.match(doc["metadata"]["url"]), doc["metadata"]["url"]


def test_corpus_ids_and_urls_unique():
    ids = [d["_id"] for d in _corpus()]
    urls = [d["metadata"]["url"] for d in _corpus()]
    titles = [d["title"] for d in _corpus()]
    assert not [i for i, n in Counter(ids).items() if n > 1]
    assert not [u for u, n in Counter(urls).items() if n > 1]
    assert not [t for t, n in Counter(titles).items() if n > 1]


def test_corpus_size_and_document_lengths():
    lo, hi = DOC_RANGE
    assert lo <= len(_corpus()) <= hi
    wlo, whi = DOC_WORDS
    bad = {d["_id"]: len(d["text"].split()) for d in _corpus()}
    bad = {k: n for k, n in bad.items() if not wlo <= n <= whi}
    assert not bad, f"documents outside {DOC_WORDS} words: {bad}"


def test_query_records_and_metadata():
    for q in _queries():
        assert set(q) == {"_id", "text", "metadata"}, q.get("_id")
        assert isinstance(q["_id"], str) and q["_id"].strip()
        assert isinstance(q["text"], str) and q["text"].strip(), q["_id"]
        meta = q["metadata"]
        assert set(meta) == {"intent", "category", "difficulty"}, q["_id"]
        assert meta["intent"] in INTENTS, q["_id"]
        assert isinstance(meta["category"], str) and meta["category"], q["_id"]
        assert meta["difficulty"] in DIFFICULTIES, q["_id"]


def test_query_ids_and_texts_unique():
    ids = [q["_id"] for q in _queries()]
    texts = [q["text"].casefold() for q in _queries()]
    assert not [i for i, n in Counter(ids).items() if n > 1]
    assert not [t for t, n in Counter(texts).items() if n > 1]


def test_query_ids_do_not_collide_with_doc_ids():
    assert not {q["_id"] for q in _queries()} & {d["_id"] for d in _corpus()}


def test_test_tsv_is_beir_three_column_with_header():
    raw = (SUITE / "qrels/test.tsv").read_text(encoding="utf-8")
    assert raw.endswith("\n") and "\r" not in raw
    assert len(_test_qrels()) > 0


def test_dev_tsv_is_trec_four_column_without_header():
    raw = (SUITE / "qrels/dev.tsv").read_text(encoding="utf-8")
    assert raw.endswith("\n") and "\r" not in raw
    first = raw.splitlines()[0]
    assert not first.lower().startswith(("query-id", "qid", "query")), first
    assert len(_dev_qrels()) > 0


@pytest.mark.parametrize("split", ["test", "dev"])
def test_qrels_reference_existing_ids_and_valid_grades(split):
    rows = _test_qrels() if split == "test" else _dev_qrels()
    doc_ids = {d["_id"] for d in _corpus()}
    query_ids = {q["_id"] for q in _queries()}
    assert not {qid for qid, _, _ in rows} - query_ids
    assert not {did for _, did, _ in rows} - doc_ids
    assert all(0 <= g <= 3 for _, _, g in rows), sorted({g for _, _, g in rows})
    pairs = [(qid, did) for qid, did, _ in rows]
    assert not [p for p, n in Counter(pairs).items() if n > 1], "duplicate judgments"


def test_splits_are_disjoint_and_cover_all_queries():
    test_ids, dev_ids = _split_ids(_test_qrels()), _split_ids(_dev_qrels())
    assert not test_ids & dev_ids
    assert test_ids | dev_ids == {q["_id"] for q in _queries()}


def test_query_counts_within_stated_ranges():
    lo, hi = TEST_QUERY_RANGE
    assert lo <= len(_split_ids(_test_qrels())) <= hi
    lo, hi = DEV_QUERY_RANGE
    assert lo <= len(_split_ids(_dev_qrels())) <= hi


@pytest.mark.parametrize("split", ["test", "dev"])
def test_every_query_has_a_grade_two_or_better(split):
    rows = _test_qrels() if split == "test" else _dev_qrels()
    best: dict[str, int] = {}
    for qid, _, g in rows:
        best[qid] = max(best.get(qid, 0), g)
    assert not sorted(q for q, g in best.items() if g < 2)


def test_judgment_depth_and_grade_spread():
    per_query = Counter(qid for qid, _, _ in _test_qrels())
    in_range = [q for q, n in per_query.items() if 2 <= n <= 5]
    assert len(in_range) >= 0.75 * len(per_query), per_query
    grades = Counter(g for _, _, g in _test_qrels())
    # Graded, with explicit zero judgments on distractors.
    assert all(grades[g] > 0 for g in (0, 1, 2, 3)), grades


def test_queries_cover_difficulties_and_intents():
    test_ids = _split_ids(_test_qrels())
    test_q = [q for q in _queries() if q["_id"] in test_ids]
    assert {q["metadata"]["difficulty"] for q in test_q} == DIFFICULTIES
    assert len({q["metadata"]["intent"] for q in test_q}) >= 4


def test_readme_states_the_actual_counts():
    readme = (SUITE / "README.md").read_text(encoding="utf-8")
    n_test, n_dev = len(_split_ids(_test_qrels())), len(_split_ids(_dev_qrels()))
    expected = [
        f"{len(_corpus())} documents",
        f"{len(_queries())} queries",
        f"{n_test} test queries",
        f"{n_dev} dev queries",
        f"{len(_test_qrels())} test judgments",
        f"{len(_dev_qrels())} dev judgments",
    ]
    missing = [s for s in expected if s not in readme]
    assert not missing, f"README.md does not state: {missing}"


def test_bm25_finds_a_relevant_doc_for_easy_queries():
    """Coherence check: plain BM25 should solve most keyword-exact (easy) queries."""
    stemmer = Stemmer.Stemmer("english")
    docs = list(_corpus())
    texts = [d["title"] + " " + d["text"] for d in docs]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    relevant: dict[str, set[str]] = {}
    for qid, did, g in _test_qrels():
        if g >= 2:
            relevant.setdefault(qid, set()).add(did)
    easy = [q for q in _queries() if q["_id"] in relevant and q["metadata"]["difficulty"] == "easy"]
    assert len(easy) >= 5, "too few easy test queries for a meaningful check"
    tokens = bm25s.tokenize(
        [q["text"] for q in easy], stopwords="en", stemmer=stemmer, show_progress=False
    )
    hits, _ = retriever.retrieve(tokens, k=5, show_progress=False)
    misses = []
    for q, row in zip(easy, hits, strict=True):
        top5 = {docs[int(i)]["_id"] for i in row}
        if not top5 & relevant[q["_id"]]:
            misses.append(q["_id"])
    assert len(easy) - len(misses) >= 0.8 * len(easy), f"easy queries missed: {misses}"
