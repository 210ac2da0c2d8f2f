"""A team's own suite (issue 34, docs/own-suite.md): `rageval suite init` from a folder of
Markdown, text, HTML and PDF, queries that start unjudged, pooling, the graded sheet merged
back, and the gate over the team's own Python entry point."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation import sheets
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.golden import load_suite
from tests.conftest import REPO
from tests.own_suite import QUERIES, add_queries, docs_folder, grade_sheet, judge

BM25 = {"retriever": "bm25", "chunking": {"strategy": "reference"}}


def _init(tmp_path, capsys):
    docs, data = docs_folder(tmp_path), tmp_path / "data"
    assert main(["suite", "init", str(docs), "--name", "kettle", "--data", str(data)]) == 0
    return docs, data / "suites" / "kettle", capsys.readouterr()


def test_suite_init_reads_every_format_with_ids_from_paths(tmp_path, capsys):
    docs, folder, printed = _init(tmp_path, capsys)
    suite = load_suite(folder)
    assert printed.out.startswith(
        f"wrote {folder / 'suite.json'}: 9 documents (3 html, 4 markdown, 1 pdf, 1 plain), "
        "reference chunking markdown_headers ("
    )
    assert suite.queries == [] and suite.chunking.strategy == "markdown_headers"
    ids = [d.id for d in suite.documents]
    assert ids == sorted(ids) and "guide/install" in ids and "api/cookies" in ids
    texts = {d.id: d.text for d in suite.documents}
    # HTML: headers as Markdown headers, navigation, styles and footers dropped, code kept.
    assert texts["api/cookies"].startswith("# Response cookies\n\n")
    assert "## Setting response cookies" in texts["api/cookies"]
    assert "response.set_cookie(name, value)" in texts["api/cookies"]
    assert "Home" not in texts["api/cookies"] and "font:" not in texts["api/cookies"]
    assert "- Register a handler" in texts["api/errors"] and "track()" not in texts["api/errors"]
    assert {d.id: d.title for d in suite.documents}["api/errors"] == "Errors"
    # PDF: one section per page; plain text kept as it is.
    assert texts["guide/faq"] == "## Page 1\n\nKettle is licensed under MIT.\n"
    assert texts["README"] == (docs / "README.txt").read_text()
    # The suite is a suite: validate accepts it and says it has no queries yet.
    assert main(["validate", str(folder)]) == 0
    assert "no queries yet" in capsys.readouterr().err
    # A second init refuses to overwrite; two files with one id are refused by name.
    assert main(["suite", "init", str(docs), "--name", "kettle", "--data", str(folder.parents[1])])
    assert "exists already" in capsys.readouterr().err
    (docs / "guide" / "install.html").write_text("<h1>Install</h1><p>pip</p>")
    assert main(["suite", "init", str(docs), "--name", "other", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {docs / 'guide' / 'install.md'}: has the id 'guide/install' of "
        "guide/install.html: rename one\n"
    )
    assert not (tmp_path / "suites" / "other").exists()


def test_unjudged_queries_are_pooled_graded_merged_and_then_gated(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "storage"))
    _, folder, _ = _init(tmp_path, capsys)
    add_queries(folder / "suite.json")
    assert main(["validate", str(folder)]) == 0  # a warning per query, not an error
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == len(QUERIES)
    assert warnings[0].endswith(
        "queries[0] K01: not yet judged (`rageval pool`, grade the sheet, `rageval pool merge`)"
    )
    with pytest.raises(InputError) as refused:  # the gate's one line
        loaders.require_judged(folder)
    assert str(refused.value).startswith(
        f"{folder / 'suite.json'}: 10 query(ies) not yet judged (K01, K02, K03, ...): the gate "
        "does not gate an unjudged query"
    )
    systems = tmp_path / "systems.yaml"
    systems.write_text(json.dumps({"systems": {"bm25": BM25}}))
    sheet = tmp_path / "sheet.csv"
    argv = [
        "pool",
        "export",
        str(folder),
        "-o",
        str(sheet),
        "--systems",
        str(systems),
        "--no-extra",
    ]
    assert main([*argv, "-k", "5"]) == 0
    printed = capsys.readouterr()
    assert "pooling 10 queries with 1 systems: bm25" in printed.err
    assert "bm25: indexing " in printed.err and "bm25: ran 10 queries" in printed.err
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["query_id", "query", "excerpt", "grade"]
    assert [r["query_id"] for r in rows] == sorted(r["query_id"] for r in rows)  # by query
    assert all(r["query"] == QUERIES[r["query_id"]][0] for r in rows)
    assert all(len(r["excerpt"]) <= len(r["target_text"]) + 2 for r in rows)
    answered = {(r["query_id"], r["target_id"]) for r in rows}
    assert {(q, target) for q, (_, target) in QUERIES.items()} <= answered
    # The assessor grades the cookie section 3 and its templated twin, the headers section, 0
    # for K09: near-duplicates graded apart, which merge refuses by sheet line and section.
    grade_sheet(sheet)
    line = next(  # where the row starts in the file (cells hold line breaks)
        n
        for n, r in sheets.read_rows(sheet)
        if (r["query_id"], r["target_id"]) == ("K09", "api/headers:chunk:1")
    )
    before = (folder / "suite.json").read_text()
    assert main(["pool", "merge", str(folder), str(sheet)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(
        f"error: {sheet}:{line}: query K09: api/headers:chunk:1 has grade 0, but its "
        "near-duplicate api/cookies:chunk:1 ("
    )
    assert err[-1] == (
        f"error: {sheet}: 1 near-duplicate pair(s) graded differently; nothing written"
    )
    assert (folder / "suite.json").read_text() == before
    # The team says why the two differ; the merge then writes a suite validate accepts.
    suite = json.loads(before)
    suite["distinct"] = [
        {
            "targets": ["api/headers:chunk:1", "api/cookies:chunk:1"],
            "reason": "templated pages: one sets headers, the other cookies",
        }
    ]
    (folder / "suite.json").write_text(json.dumps(suite, indent=2) + "\n")
    assert main(["pool", "merge", str(folder), str(sheet)]) == 0
    assert f"{len(rows)} added" in capsys.readouterr().out
    assert main(["validate", str(folder)]) == 0
    assert capsys.readouterr().err == ""
    loaders.require_judged(folder)  # judged: the gate takes it


def test_pool_measures_what_an_embedding_would_cost_and_asks_first(tmp_path, capsys, monkeypatch):
    """The cost is measured on a sample of the texts (the model loaded, the sample's vectors
    kept); past the threshold nothing more is embedded without --embed."""
    import rageval_pipeline.cli.pool as pool_cli

    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "storage"))
    _, folder, _ = _init(tmp_path, capsys)
    add_queries(folder / "suite.json")
    systems = tmp_path / "systems.yaml"
    dense = {"retriever": "dense", "chunking": {"strategy": "reference"}}
    systems.write_text(json.dumps({"systems": {"bm25": BM25, "dense": dense}}))
    monkeypatch.setattr(pool_cli, "EMBED_WITHOUT_ASKING_S", 0.0)  # as if the corpus were large
    argv = ["pool", "export", str(folder), "-o", str(tmp_path / "s.csv"), "--systems", str(systems)]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("pool: ") and lines[0].endswith(
        ": loading the model to measure the cost"
    )  # nothing recorded here yet
    error = lines[-1]
    assert error.startswith("error: pool: ") and "chunks to embed on the CPU (dense " in error
    assert re.search(
        r"about \d+ s in all, measured now \(model loaded in [\d.]+ s, \d+ chunks", error
    )
    assert (
        "add --embed to go ahead, --no-extra to leave out dense-fixed128, dense-paragraph" in error
    )
    assert not (tmp_path / "s.csv").exists()
    # The sample's vectors and the cost it measured are kept for the next run.
    (model,) = (tmp_path / "storage" / "embeddings").iterdir()
    assert list(model.glob("shard-*.parquet")) and (model / "rate.json").is_file()


def test_pool_refuses_a_corrupt_recorded_cost_in_one_line(tmp_path, capsys, monkeypatch):
    from rageval_pipeline.core.retrieval.dense import model_key
    from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache

    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "storage"))
    _, folder, _ = _init(tmp_path, capsys)
    add_queries(folder / "suite.json")
    cache = EmbeddingCache(tmp_path / "storage" / "embeddings", model_key("all-MiniLM-L6-v2", 256))
    cache.directory.mkdir(parents=True)
    rate = cache.directory / "rate.json"
    rate.write_text('{"cost": {"fixed_s": 0.1, "per_token_s": -2, "tokens_per_char": 0.3}}')
    argv = ["pool", "export", str(folder), "-o", str(tmp_path / "s.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {rate}: cost.per_token_s: ") and err.count("\n") == 1
    assert not (tmp_path / "s.csv").exists()


def test_pool_counts_a_text_two_chunkings_cut_alike_once_at_the_recorded_cost(
    tmp_path, capsys, monkeypatch
):
    """The estimate counts each distinct passage once over every dense system (the cache
    embeds it once: here a configured system cuts paragraphs as an extra one does); before the
    model is loaded it says what the cost the model recorded here makes of it."""
    import rageval_pipeline.cli.pool as pool_cli
    from rageval_pipeline.core.curation import pool
    from rageval_pipeline.core.retrieval import dense as dense_retrieval
    from rageval_pipeline.core.retrieval.embedding_cost import Cost, Recorded
    from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache
    from rageval_pipeline.core.suites.chunking import chunk_once
    from rageval_pipeline.core.suites.golden import load_suite
    from rageval_pipeline.core.suites.loaders import suite_tables

    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "storage"))
    _, folder, _ = _init(tmp_path, capsys)
    add_queries(folder / "suite.json")
    systems = tmp_path / "systems.yaml"
    dense = {"retriever": "dense", "chunking": {"strategy": "reference"}}
    paragraphs = {"retriever": "dense", "chunking": {"strategy": "paragraph"}}
    configured = {"bm25": BM25, "dense": dense, "ours": paragraphs}
    systems.write_text(json.dumps({"systems": configured}))
    cost = Cost(fixed_s=0.5, per_token_s=0.01, tokens_per_char=0.25)
    recorded = Recorded(cost=cost, recorded_at=1.0, load_average=1.5)
    monkeypatch.setattr(EmbeddingCache, "cost", lambda self: recorded)
    monkeypatch.setattr(pool_cli, "EMBED_WITHOUT_ASKING_S", 0.0)
    argv = ["pool", str(folder), "-o", str(tmp_path / "s.csv"), "--systems", str(systems)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(
        r"chunks to embed on the CPU \(dense \d+, ours \d+, dense-fixed128 \d+\): "
        r"about \d+ (s|min) by the cost recorded here \d+ min ago \(load 1.5, now ",
        err,
    )
    suite = load_suite(folder)
    corpus = suite_tables(suite).corpus
    chunkings = [suite.chunking, pool.EXTRA_CHUNKINGS["paragraph"], *pool.EXTRA_CHUNKINGS.values()]
    texts = [
        set(dense_retrieval.passage_texts(chunk_once(corpus, c.resolve(suite.chunking))))
        for c in chunkings
    ]
    total = int(re.search(r"pool: ([\d,]+) chunks to embed", err).group(1).replace(",", ""))
    assert total == len(set().union(*texts)) < sum(map(len, texts))


@pytest.mark.slow
def test_the_walkthrough_from_a_docs_folder_to_a_gated_build(pipeline_home, capsys):
    """docs/own-suite.md end to end on the fixture docs: suite init, queries, pool, the graded
    sheet merged, an evaluation of the team's Python entry point, its baseline; then the bad
    change blocked by the CI recipe (deploy/ci/gate.sh, which runs `dagster job execute`: exit
    1) and the good one passing."""
    import dagster as dg

    from rageval_pipeline.defs.definitions import build_definitions
    from tests.own_suite import write_search

    data = pipeline_home / "data"
    docs = docs_folder(pipeline_home)
    assert main(["suite", "init", str(docs), "--name", "kettle"]) == 0
    folder = data / "suites" / "kettle"
    add_queries(folder / "suite.json")
    write_search(data, folder, broken=False)
    team = {"retriever": "python", "entry_point": "team_search:search"}
    (data / "systems.yaml").write_text(json.dumps({"systems": {"bm25": BM25, "team": team}}))
    judge(folder, pipeline_home / "sheet.csv", "--no-extra")
    capsys.readouterr()

    def evaluate(selection=None) -> dg.ExecuteInProcessResult:
        defs = build_definitions()  # the new suite is a partition once its folder exists
        return dg.materialize(
            list(defs.assets),
            selection=selection,
            partition_key="kettle",
            resources=defs.resources,
            raise_on_error=False,
        )

    assert evaluate().success
    assert main(["baseline", "update", "--dataset", "kettle"]) == 0
    assert (data / "baselines" / "kettle" / "team.json").is_file()
    write_search(data, folder, broken=True)  # the bad change, evaluated as CI does
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    env |= {"RAGEVAL_SUITE": "kettle", "RAGEVAL_SYSTEM": "team"}
    (pipeline_home / "dagster_home").mkdir()
    blocked = subprocess.run(
        ["bash", str(REPO / "deploy" / "ci" / "gate.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert blocked.returncode == 1, blocked.stderr[-2000:]
    assert blocked.stdout.splitlines()[-1].startswith("FAIL kettle: ")
    write_search(data, folder, broken=False)  # the fix (this process imported it before)
    fixed = evaluate("key:team/run+")
    [check] = fixed.get_asset_check_evaluations()
    assert fixed.success and check.passed


def test_the_llm_path_on_the_teams_suite(tmp_path, capsys, monkeypatch):
    """docs/own-suite.md's LLM path on the judged fixture suite, against the scripted loopback
    judge: synth (with why queries were dropped), the human sample's sheet graded, label (0
    unparseable, the calibration written)."""
    from rageval_pipeline.core.generation.config import SWITCHES
    from tests.llm_servers import FakeLLM
    from tests.scripted_judge import grade_like_a_human, reply

    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "storage"))
    _, folder, _ = _init(tmp_path, capsys)
    add_queries(folder / "suite.json")
    systems = tmp_path / "systems.yaml"
    systems.write_text(json.dumps({"systems": {"bm25": BM25}}))
    judge(folder, tmp_path / "sheet.csv", "--systems", str(systems), "--no-extra")
    fake = FakeLLM("openai", reply=reply).start()
    monkeypatch.setenv("RAGEVAL_PROVIDER", "openai")
    monkeypatch.setenv("RAGEVAL_OPENAI_BASE_URL", fake.url + "/v1")
    monkeypatch.setenv("RAGEVAL_OPENAI_MODEL", "fake-1")
    common = ["--systems", str(systems), "--depth", "3"]
    try:
        capsys.readouterr()
        synth = ["synth", str(folder), "--n", "12", "--human-sample-size", "3", *common]
        assert main(synth) == 0
        printed = capsys.readouterr().out
        assert "synthetic queries kept of 12 drawn (" in printed
        assert "near-duplicates" in printed and "not found again in the top 20" in printed
        sample_sheet = folder / "kettle.synthetic.sheet.jsonl"
        grade_like_a_human(sample_sheet)  # the human sample, judged
        label = ["label", str(folder), "--synthetic", str(folder / "kettle.synthetic.jsonl")]
        out = tmp_path / "labels"
        assert main([*label, "--human", str(sample_sheet), *common, "--output", str(out)]) == 0
    finally:
        fake.stop()
    printed = capsys.readouterr()
    labels = [json.loads(line) for line in (out / "labels.jsonl").open()]
    assert f"{len(labels)} label(s), 0 unparseable" in printed.out
    assert json.loads((out / "calibration.json").read_text())["pairs"] > 0
