"""Suite format 1.1: spans graded as nuggets with an optional `decisive` quote, refused in one
line when a span has no grade or its decisive words are not in it; `rageval spans nuggets`
bumps a 1.0 suite with every grade kept; `rageval qrels` writes the derived qrels."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import suite_spans, suite_tables

LOG = "Guests asked twice. No extra fee: the $45 cleaning fee is per stay, not per pet.\n"
NUGGET = "No extra fee: the $45 cleaning fee is per stay, not per pet."


def _span(excerpt: str, grade: int, **extra) -> dict:
    start = LOG.index(excerpt)
    end = start + len(excerpt)
    sha = hashlib.sha256(excerpt.encode("utf-8")).hexdigest()
    return {"doc": "log", "start": start, "end": end, "grade": grade, **extra, "sha256": sha}


def write_suite(folder: Path, version: str, spans: list[dict]) -> Path:
    folder.mkdir(parents=True)
    suite = {
        "version": version,
        "name": folder.name,
        "description": "nuggets",
        "created_at": "2026-12-07",
        "chunking": {"strategy": "fixed", "size": 4, "overlap": 0},
        "documents": [
            {
                "id": "log",
                "type": "interaction_event",
                "format": "plain",
                "title": "Log",
                "content": LOG,
            }
        ],
        "queries": [
            {"id": "q1", "query": "Is the pet fee per dog?", "intent": "factual", "spans": spans}
        ],
    }
    (folder / "suite.json").write_text(json.dumps(suite, indent=2) + "\n", encoding="utf-8")
    return folder


def region_and_nugget(**extra) -> list[dict]:
    return [_span(LOG.strip(), 0), _span(NUGGET, 3, primary=True, **extra)]


def grades(folder: Path) -> dict[str, int]:
    qrels = suite_tables(load_suite(folder)).qrels
    return dict(zip(qrels["doc_id"], qrels["relevance"], strict=True))


def test_the_decisive_words_carry_a_nugget_cut_by_a_chunk_boundary(tmp_path):
    """Windows of 4 words: "Guests asked twice. No" | "extra fee: the $45" | "cleaning fee is
    per" | "stay, not per pet.". Decisive in whole (13 words), no window holds half of the
    nugget: none earns it. With `decisive: "per stay, not per pet"` (5 words), the window
    holding 4 of them earns 3 and the one holding "per" earns 0."""
    plain = write_suite(tmp_path / "plain", "1.1", region_and_nugget())
    assert set(grades(plain).values()) == {0}
    keyed = write_suite(
        tmp_path / "keyed", "1.1", region_and_nugget(decisive="per stay, not per pet")
    )
    assert grades(keyed) == {f"log:chunk:{n}": g for n, g in enumerate([0, 0, 0, 3])}
    spans = suite_spans(load_suite(keyed))
    start = LOG.index("per stay")
    assert spans[["decisive_start", "decisive_end"]].values.tolist()[1] == [start, start + 21]


def refusal(folder: Path, capsys) -> str:
    assert main(["validate", str(folder)]) == 2
    return capsys.readouterr().err.strip()


def test_a_span_without_a_grade_is_refused_in_one_line(tmp_path, capsys):
    spans = region_and_nugget()
    del spans[1]["grade"]
    error = refusal(write_suite(tmp_path / "nograde", "1.1", spans), capsys)
    assert error.startswith("error: ") and "\n" not in error
    assert "suite.json:" in error and "queries[0].spans[1].grade: field required" in error


def test_decisive_words_must_be_in_the_nugget_once_and_need_format_1_1(tmp_path, capsys):
    missing = write_suite(tmp_path / "missing", "1.1", region_and_nugget(decisive="per dog"))
    error = refusal(missing, capsys)
    assert "queries[0].spans[1].decisive: query q1, document 'log'" in error
    assert "quote 'per dog' is not in the text" in error
    twice = write_suite(tmp_path / "twice", "1.1", region_and_nugget(decisive="fee"))
    assert "is in the text 2 times" in refusal(twice, capsys)
    region = [_span(LOG.strip(), 0, decisive="fee"), _span(NUGGET, 3, primary=True)]
    error = refusal(write_suite(tmp_path / "region", "1.1", region), capsys)
    assert "queries[0].spans[0].decisive: a judged region (grade 0) has no decisive part" in error
    old = write_suite(tmp_path / "old", "1.0", region_and_nugget(decisive="per stay"))
    error = refusal(old, capsys)
    assert "queries[0].spans[1].decisive: needs suite format 1.1" in error
    unknown = write_suite(tmp_path / "unknown", "2.0", region_and_nugget())
    assert 'unknown suite format version "2.0" (known: "1.0", "1.1")' in refusal(unknown, capsys)


def test_spans_nuggets_bumps_the_version_and_keeps_every_grade(tmp_path, capsys):
    folder = write_suite(tmp_path / "bump", "1.0", region_and_nugget())
    before = grades(folder)
    assert main(["spans", "nuggets", str(folder)]) == 0
    assert "format 1.1; 1 spans graded >= 1" in capsys.readouterr().out
    raw = json.loads((folder / "suite.json").read_text())
    assert raw["version"] == "1.1" and raw["queries"][0]["spans"] == region_and_nugget()
    assert grades(folder) == before
    assert main(["spans", "nuggets", str(folder)]) == 0
    assert "nothing written" in capsys.readouterr().out


def read_trec(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_rageval_qrels_writes_the_derived_qrels_of_a_chunking_and_of_passages(tmp_path, capsys):
    folder = write_suite(tmp_path / "q", "1.1", region_and_nugget(decisive="per stay, not per pet"))
    out = tmp_path / "derived.trec"
    chunking = "{strategy: fixed, size: 6, overlap: 0}"
    assert main(["qrels", str(folder), "--chunking", chunking, "-o", str(out)]) == 0
    # 6-word windows: "Guests ... extra fee:" | "the $45 cleaning fee is per" | "stay, not per
    # pet.": the last holds 4 of the 5 decisive words, the middle one 1.
    assert read_trec(out) == [
        ["q1", "0", "log:chunk:0", "0"],
        ["q1", "0", "log:chunk:1", "0"],
        ["q1", "0", "log:chunk:2", "3"],
    ]
    start = LOG.index("per stay")
    run = tmp_path / "run.trec"
    lines = [f"q1 Q0 log:span:{start}-{len(LOG) - 1} 1 2.0 team", "q1 Q0 log:span:0-20 2 1.0 team"]
    run.write_text("\n".join(lines) + "\n")
    assert main(["qrels", str(folder), "--passages", str(run), "-o", str(out)]) == 0
    assert read_trec(out) == [
        ["q1", "0", "log:span:0-20", "0"],
        ["q1", "0", f"log:span:{start}-{len(LOG) - 1}", "3"],
    ]
    assert main(["qrels", str(folder), "-o", str(out)]) == 2
    assert "give --chunking or --passages" in capsys.readouterr().err


def test_the_pipeline_judges_a_chunking_by_the_qrels_the_command_writes(tmp_path):
    """`measure_run` judges another chunking's run by `EvidenceSet.qrels`, the function
    `rageval qrels` writes: P@1 of the window holding the decisive words is 1."""
    from rageval_pipeline.core.results.store import measure_run
    from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once
    from rageval_pipeline.core.suites.derived import EvidenceSet

    folder = write_suite(tmp_path / "p", "1.1", region_and_nugget(decisive="per stay, not per pet"))
    suite = load_suite(folder)
    tables = suite_tables(suite)
    chunks = chunk_once(tables.corpus, ChunkingConfig(strategy="fixed", size=6, overlap=0))
    evidence = EvidenceSet.of(suite_spans(suite), tables.corpus, chunks)
    run = pd.DataFrame([dict(query_id="q1", doc_id="log:chunk:2", score=1.0, rank=1)])
    results = measure_run(
        run, tables.qrels, tables.queries, chunk_level=False, measures=("P@1",), evidence=evidence
    )
    assert results.level == "chunk" and results.means["value"].tolist() == [1.0]
    assert evidence.qrels()["relevance"].tolist() == [0, 0, 3]


@pytest.mark.parametrize("suite", ["techdocs", "hotel"])
def test_bundled_suites_are_format_1_1(suite):
    root = Path(__file__).resolve().parents[1]
    assert load_suite(root / "data" / "suites" / suite).version == "1.1"


def _bundled_fixed_64(suite: str, query: str) -> tuple[dict[str, int], dict[str, str]]:
    from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_once

    root = Path(__file__).resolve().parents[1]
    loaded = load_suite(root / "data" / "suites" / suite)
    corpus = suite_tables(loaded).corpus
    chunking = "{strategy: fixed, size: 64, overlap: 0}"
    qrels = suite_qrels_of(loaded, chunking)
    qrels = qrels[qrels["query_id"] == query]
    chunks = chunk_once(corpus, ChunkingConfig(strategy="fixed", size=64, overlap=0))
    texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    text_of = {
        c.chunk_id: " ".join(texts[c.doc_id][c.start : c.end].split()) for c in chunks.itertuples()
    }
    return dict(zip(qrels["doc_id"], qrels["relevance"], strict=True)), text_of


def suite_qrels_of(suite, spec: str) -> pd.DataFrame:
    from rageval_pipeline.cli.qrels import _chunking
    from rageval_pipeline.core.suites.loaders import suite_qrels

    return suite_qrels(suite, chunking=_chunking(spec))


def test_the_audited_chunks_derive_what_their_text_says():
    """hotel q048 (two dogs: is the fee per dog?): the fixed-64 incident-log window starting
    "is per stay, not per pet." holds the decisive words of the grade-3 line and derives 3; the
    window before it, ending "...the $45 cleaning fee", holds the rest of that nugget and
    derives only what it holds whole (the grade-1 'two pets' line). techdocs Q046 (429 errors):
    the four-token api-reference window "no active index generation)." derives 0."""
    grades, text_of = _bundled_fixed_64("hotel", "q048")
    [answer] = [c for c in grades if text_of[c].startswith("is per stay, not per pet.")]
    before = answer.replace(":chunk:24", ":chunk:23")
    assert text_of[before].endswith("No extra fee: the $45 cleaning fee")
    assert (grades[answer], grades[before]) == (3, 1)
    grades, text_of = _bundled_fixed_64("techdocs", "Q046")
    [fragment] = [c for c in grades if text_of[c] == "no active index generation)."]
    assert fragment.startswith("api-reference:chunk:") and grades[fragment] == 0


def test_rageval_qrels_refuses_bad_input_in_one_line(tmp_path, capsys):
    folder = write_suite(tmp_path / "r", "1.1", region_and_nugget())
    out, run = tmp_path / "q.trec", tmp_path / "run.trec"
    run.write_text("q1 Q0 log:chunk:0 1 2.0 team\n")
    assert main(["qrels", str(folder), "--passages", str(run), "-o", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"error: {run}: doc_id: 'log:chunk:0': is not a passage id `doc:span:start-end`"
    )
    run.write_text("q1 Q0 log:span:10-9000 1 2.0 team\n")
    assert main(["qrels", str(folder), "--passages", str(run), "-o", str(out)]) == 2
    assert "10..9000 is not a passage of 'log'" in capsys.readouterr().err
    bad = "{strategy: fixed, size: 0}"
    assert main(["qrels", str(folder), "--chunking", bad, "-o", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: --chunking: size:") and "\n" not in error
    assert not out.exists()
