"""The team's own retriever at section level (issue 33): an outside system returning the suite's
chunk ids, passage text or character offsets is scored at chunk level, with span measures."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.results.store import measure_run
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.suites.derived import suite_evidence
from rageval_pipeline.core.suites.passages import Locator, passage_id, passage_units
from rageval_pipeline.core.systems import RunInputs
from rageval_pipeline.core.systems.external import HttpSystem, RunFileSystem
from tests.test_derived_qrels import TECHDOCS, techdocs
from tests.test_external import ok, serve  # noqa: F401 - serve: the loopback fixture

DOCS = pd.DataFrame({"doc_id": ["a", "b"], "text": ["Alpha beta.\n\n  Gamma   delta.", "beta"]})


def test_a_passage_is_found_verbatim_or_across_reflowed_whitespace():
    locator = Locator(DOCS)
    assert locator.locate("beta") == ("a", 6, 10)  # the first document holding it
    assert locator.locate("beta", "b") == ("b", 0, 4)  # the one the result names
    assert locator.locate("Gamma delta.") == ("a", 15, 29)  # whitespace re-joined
    assert locator.locate("epsilon") is None and locator.locate("  ") is None
    assert locator.extent("a", 0, 11) is None
    assert "not a passage" in (locator.extent("a", 5, 99) or "")
    assert "not in the corpus" in (locator.extent("z", 0, 1) or "")
    ids = pd.Series([passage_id("a", 0, 11), "a:chunk:0", None, passage_id("x:y", 3, 9)])
    units = passage_units(ids)
    assert units.values.tolist() == [["a:span:0-11", "a", 0, 11], ["x:y:span:3-9", "x:y", 3, 9]]


@pytest.fixture(scope="module")
def suite():
    docs, queries, qrels, reference = techdocs()
    chunks = chunk_corpus(docs, reference, "t")
    spans = loaders.load_part(TECHDOCS, "spans", dataset="techdocs")
    spans = spans[spans["split"] == "test"]
    judged = queries[queries["query_id"].isin(qrels["query_id"])].reset_index(drop=True)
    # The team's retriever: each query's judged sections, best first, then two others.
    graded = qrels[qrels["level"] == "chunk"].sort_values(["query_id", "relevance", "doc_id"])
    answers = {
        text: list(
            dict.fromkeys(
                graded.loc[graded["query_id"] == qid, "doc_id"].tolist()[::-1][:8]
                + chunks["chunk_id"].tolist()[:2]
            )
        )
        for qid, text in zip(judged["query_id"], judged["text"], strict=True)
    }
    return docs, judged, qrels, reference, chunks, spans, answers


def _run(url: str, suite, tmp_path: Path) -> pd.DataFrame:
    docs, queries, _, reference, *_ = suite
    system = HttpSystem(retriever="http", url=url, retries=1)
    inputs = RunInputs(queries, 10, tmp_path, tmp_path, corpus=docs, reference=reference)
    return system.produce_run(inputs)


def _measured(run: pd.DataFrame, suite, own: bool):
    docs, queries, qrels, reference, _, spans, _ = suite
    chunks = chunk_corpus(docs, reference, "") if own else None
    return measure_run(
        run,
        qrels,
        queries,
        chunk_level=own,
        evidence=suite_evidence(spans, docs, lambda: chunks),
        measures=("nDCG@10", "EvidenceRecall@10", "EvidenceRecall@512t", "TokenPrecision@512t"),
    )


def _means(results) -> dict[str, float]:
    return dict(zip(results.means["measure"], results.means["value"], strict=True))


def test_section_ids_and_text_passages_are_scored_at_chunk_level_alike(serve, suite, tmp_path):  # noqa: F811
    docs, _, _, reference, chunks, _, answers = suite
    texts = dict(zip(chunks["chunk_id"], chunks["text"], strict=True))

    def sections(body: dict):
        return ok([{"id": c, "score": 10.0 - i} for i, c in enumerate(answers[body["query"]])])

    def passages(body: dict):
        ids = answers[body["query"]]
        return ok([{"id": f"p{i}", "score": 10.0 - i, "text": texts[c]} for i, c in enumerate(ids)])

    by_id = _run(serve(sections).url, suite, tmp_path)
    by_text = _run(serve(passages).url, suite, tmp_path)
    system = HttpSystem(retriever="http", url="http://127.0.0.1:1/x")
    assert system.returns_suite_chunks(by_id, reference, docs)
    assert not system.returns_suite_chunks(by_text, reference, docs)
    assert by_text["doc_id"].str.contains(":span:").all()
    ids, text = _measured(by_id, suite, own=True), _measured(by_text, suite, own=False)
    assert ids.level == text.level == "chunk"
    # Each text is located at its section's extent: the same evidence at the same cost.
    for measure in ("EvidenceRecall@10", "EvidenceRecall@512t", "TokenPrecision@512t"):
        assert _means(text)[measure] == pytest.approx(_means(ids)[measure]), measure
    # Derived from the spans, the passages' grades are the sections' (the reference rule).
    assert text.top["grade"].tolist() == ids.top["grade"].tolist()
    assert _means(ids)["EvidenceRecall@512t"] > 0.3
    # The section ids judged by whole document, as before, retrieve far more text.
    whole = measure_run(by_id, suite[2], suite[1], chunk_level=False, measures=("nDCG@10",))
    assert whole.level == "document"


def test_offsets_are_passages_and_bad_offsets_or_text_name_the_field(serve, suite, tmp_path):  # noqa: F811
    docs, *_ = suite
    doc, text = docs["doc_id"].iloc[0], docs["text"].iloc[0]
    offsets = serve(lambda body: ok([{"doc_id": doc, "start": 0, "end": 40, "score": 1.0}]))
    run = _run(offsets.url, suite, tmp_path)
    assert set(run["doc_id"]) == {f"{doc}:span:0-40"} and set(run["source_id"]) == {doc}
    past = serve(lambda body: ok([{"doc_id": doc, "start": 0, "end": len(text) + 1, "score": 1}]))
    with pytest.raises(InputError, match=r"results\[0\].*not a passage of"):
        _run(past.url, suite, tmp_path)
    unknown = serve(lambda body: ok([{"id": "x", "score": 1.0, "text": "no such words anywhere"}]))
    with pytest.raises(InputError, match=r"results\[0\]\.text.*found in no document"):
        _run(unknown.url, suite, tmp_path)
    half = serve(lambda body: ok([{"doc_id": doc, "start": 0, "score": 1.0}]))
    with pytest.raises(InputError, match="doc_id, start and end come together"):
        _run(half.url, suite, tmp_path)


def test_a_run_file_of_section_ids_is_scored_at_chunk_level(suite, tmp_path):
    docs, _, _, reference, chunks, *_ = suite
    run = pd.DataFrame({"query_id": ["q"], "doc_id": [chunks["chunk_id"].iloc[3]], "score": [1.0]})
    system = RunFileSystem(retriever="run_file", path="run.trec")
    assert system.returns_suite_chunks(run, reference, docs)
    assert not system.returns_suite_chunks(run.assign(doc_id="a:chunk:9999"), reference, docs)
    assert not system.returns_suite_chunks(
        run.assign(doc_id=docs["doc_id"].iloc[0]), reference, docs
    )


def test_pooling_takes_a_passage_or_a_document_as_the_reference_sections_it_covers():
    from rageval_pipeline.core.curation import pool
    from rageval_pipeline.core.suites.golden import load_suite

    suite = load_suite(Path(__file__).parent / "fixtures" / "pool" / "poolsuite")
    mapper = pool.ReferenceMap(suite)
    words = list(re.finditer(r"\S+", mapper.texts["tokens"]))
    # Tokens 6-11 lie inside section 1 (tokens 6-19); 0-11 cover section 0 too.
    inside = passage_id("tokens", words[6].start(), words[11].end())
    assert mapper.to_reference(inside, suite.chunking) == ["tokens:chunk:1"]
    wider = passage_id("tokens", 0, words[11].end())
    assert mapper.to_reference(wider, suite.chunking) == ["tokens:chunk:0", "tokens:chunk:1"]
    assert mapper.to_reference(passage_id("nowhere", 0, 5), suite.chunking) == []
    # A whole document (a system scored by document) is judged by its best section: all pooled.
    sections = mapper.spans("tokens", suite.chunking)
    assert len(sections) >= 3
    expected = [f"tokens:chunk:{n}" for n in range(len(sections))]
    assert mapper.to_reference("tokens", suite.chunking) == expected


@pytest.mark.slow
def test_two_http_systems_are_scored_at_chunk_level_through_dagster_job_execute(
    serve,  # noqa: F811
    suite,
    pipeline_home,
):
    """The real CLI: one service answers with section ids, one with the sections' text."""
    import json
    import os

    from tests.test_cli_job import dagster_execute

    *_, chunks, _, answers = suite
    texts = dict(zip(chunks["chunk_id"], chunks["text"], strict=True))
    ids = serve(
        lambda body: ok([{"id": c, "score": 9.0 - i} for i, c in enumerate(answers[body["query"]])])
    )
    text = serve(
        lambda body: ok(
            [
                {"id": f"p{i}", "score": 9.0 - i, "text": texts[c]}
                for i, c in enumerate(answers[body["query"]])
            ]
        )
    )
    systems = {
        "ours_ids": {"retriever": "http", "url": ids.url},
        "ours_text": {"retriever": "http", "url": text.url},
    }
    data = pipeline_home / "data"
    (data / "systems.yaml").write_text(json.dumps({"systems": systems}))
    (pipeline_home / "dagster_home").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    done = dagster_execute("evaluate_dataset", "techdocs", env, pipeline_home)
    terminal = done.stdout + done.stderr
    assert done.returncode == 0, terminal[-6000:]
    # Each system's scoring level in the terminal (its metrics step's line) ...
    for name in systems:
        assert re.search(rf"techdocs/{name} \(chunk level\): .*EvidenceRecall@512t=", terminal)
    reports = pipeline_home / "storage" / "reports" / "techdocs" / "latest"
    verdict = json.loads((reports / "gate.json").read_text())
    assert {(c["system"], c["level"]) for c in verdict["changes"]} == {
        ("ours_ids", "chunk"),
        ("ours_text", "chunk"),
    }
    values = {
        (c["system"], c["measure"]): c["value"] for c in verdict["checks"] if c["kind"] == "value"
    }
    for measure in ("EvidenceRecall@10", "EvidenceRecall@512t", "TokenPrecision@512t"):
        assert values[("ours_text", measure)] == pytest.approx(values[("ours_ids", measure)])
        assert values[("ours_ids", measure)] > 0
    # ... and on the report's first screen.
    screen = (reports / "gate.md").read_text().split("## Measures that moved")[0]
    assert "Scored techdocs/ours_ids at chunk level, techdocs/ours_text at chunk level." in screen
