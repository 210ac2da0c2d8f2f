"""The Dagster layer through `dagster.materialize`: a real DuckDB file and real Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow.parquet as pq
import pytest
import pytrec_eval

from rageval_pipeline.core.gate import baseline_path, load_baseline
from rageval_pipeline.core.storage.warehouse import Warehouse
from rageval_pipeline.core.suites import chunk_corpus, loaders
from rageval_pipeline.defs.definitions import build_definitions

PARTITION = "beir-mini"


def _materialize(defs: dg.Definitions, selection=None, partition=PARTITION, **kwargs):
    assets = list(defs.assets)
    return dg.materialize(
        assets,
        selection=selection,
        partition_key=partition,
        resources=defs.resources,
        raise_on_error=False,
        **kwargs,
    )


def _asset_file(home: Path, *key: str, partition: str = PARTITION) -> Path:
    return home / "storage" / "assets" / Path(*key) / f"{partition}.parquet"


@pytest.fixture
def evaluated(evaluated_template, evaluated_home):
    """beir-mini evaluated (a copy of the session's template, tests/conftest.py): definitions
    built on the copy, the template's materialization result, the copy's home."""
    return build_definitions(), evaluated_template.result, evaluated_home


def test_end_to_end_writes_tables_warehouse_and_passing_gate(evaluated):
    _, result, home = evaluated
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"metadata_complete": True, "hashes_valid": True, "verdict_passes": True}
    warehouse = Warehouse(home / "storage" / "rageval.duckdb")
    runs = warehouse.query("SELECT * FROM runs")
    assert runs[["dataset", "split", "system", "level"]].values.tolist() == [
        [PARTITION, "test", "bm25", "document"]
    ]
    means = warehouse.query("SELECT measure, value FROM run_metrics")
    assert {"nDCG@10", "R@100", "RR", "P@5"} <= set(means["measure"])
    assert (home / "storage" / "reports" / PARTITION / "latest" / "gate.html").exists()
    for table in ("run_metrics", "query_metrics", "group_metrics", "latency"):
        assert list((home / "storage" / "tables" / table).rglob("*.parquet")), table
    [quality] = (home / "storage" / "reports" / "quality" / PARTITION / "bm25").glob("*.md")
    queries = len(
        (home / "data" / "suites" / PARTITION / "qrels" / "test.tsv").read_text().splitlines()[1:]
    )
    assert "| difficulty | queries | P@5 | R@10 | MRR |" in quality.read_text()
    assert queries > 0


def test_per_query_values_equal_pytrec_eval(evaluated):
    _, _, home = evaluated
    run = pq.read_table(_asset_file(home, "bm25", "run")).to_pandas()
    qrels = pq.read_table(_asset_file(home, "qrels")).to_pandas()
    qrels = qrels[qrels["split"] == "test"]
    ours = Warehouse(home / "storage" / "rageval.duckdb").query(
        "SELECT query_id, measure, value FROM query_metrics"
    )
    # Documents are single chunks here: the document id is the run's source_id.
    trec_run: dict[str, dict[str, float]] = {}
    for row in run.dropna(subset=["doc_id"]).itertuples():
        trec_run.setdefault(row.query_id, {})[row.source_id] = row.score
    trec_qrels: dict[str, dict[str, int]] = {}
    for row in qrels.itertuples():
        trec_qrels.setdefault(row.query_id, {})[row.doc_id] = int(row.relevance)
    oracle = pytrec_eval.RelevanceEvaluator(
        trec_qrels, {"ndcg_cut.10", "recall.100", "recip_rank", "P.5"}
    ).evaluate(trec_run)
    names = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "RR": "recip_rank", "P@5": "P_5"}
    compared = 0
    for row in ours[ours["measure"].isin(names)].itertuples():
        if row.query_id in oracle:
            assert row.value == pytest.approx(oracle[row.query_id][names[row.measure]], abs=1e-9)
            compared += 1
    assert compared == 4 * len(oracle) > 0


def test_gate_alone_recomputes_nothing_upstream(evaluated):
    defs, _, home = evaluated
    warehouse = Warehouse(home / "storage" / "rageval.duckdb")
    runs_before = warehouse.query("SELECT run_id FROM runs")
    run_file = _asset_file(home, "bm25", "run")
    stamp = run_file.stat().st_mtime_ns
    result = dg.materialize(
        list(defs.assets),
        selection="gate",
        partition_key=PARTITION,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert result.success
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"gate"}
    assert run_file.stat().st_mtime_ns == stamp
    assert warehouse.query("SELECT run_id FROM runs").equals(runs_before)


def test_replay_gives_identical_rankings_and_metrics(evaluated):
    defs, _, home = evaluated
    first_run = pq.read_table(_asset_file(home, "bm25", "run")).to_pandas()
    first_metrics = pq.read_table(_asset_file(home, "bm25", "metrics")).to_pandas()
    assert _materialize(defs, selection="bm25/run+").success
    second_run = pq.read_table(_asset_file(home, "bm25", "run")).to_pandas()
    second_metrics = pq.read_table(_asset_file(home, "bm25", "metrics")).to_pandas()
    cols = ["query_id", "doc_id", "rank", "score"]
    pd.testing.assert_frame_equal(first_run[cols], second_run[cols])
    cols = ["query_id", "measure", "value"]
    pd.testing.assert_frame_equal(first_metrics[cols], second_metrics[cols])


def test_baseline_regression_fails_the_blocking_check(evaluated):
    from rageval_pipeline.cli import main

    defs, _, home = evaluated
    baselines = home / "data" / "baselines"
    storage = str(home / "storage")
    assert (
        main(
            [
                "baseline",
                "update",
                "--dataset",
                PARTITION,
                "--storage",
                storage,
                "--baselines",
                str(baselines),
            ]
        )
        == 0
    )
    path = baseline_path(baselines, PARTITION, "bm25")
    assert load_baseline(path).measures["nDCG@10"] > 0
    raw = json.loads(path.read_text())
    for values in raw["per_query"].values():  # the gate judges paired per-query values
        values["nDCG@10"] = min(1.0, values["nDCG@10"] + 0.2)
    # A baseline's mean must be its per-query values' mean (a loaded baseline is checked).
    per_query = [values["nDCG@10"] for values in raw["per_query"].values()]
    raw["measures"]["nDCG@10"] = sum(per_query) / len(per_query)
    path.write_text(json.dumps(raw))
    result = dg.materialize(
        list(defs.assets),
        selection="gate",
        partition_key=PARTITION,
        resources=defs.resources,
        raise_on_error=False,
    )
    [check] = result.get_asset_check_evaluations()
    assert not check.passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    assert "nDCG@10" in check.description or "nDCG@10" in json.dumps(
        check.metadata["failures"].value
    )
    # the check's text leads with the verdict, a line per run and where the reports are
    assert check.description.startswith("FAIL: ")
    assert f" · {PARTITION}/test/" in check.description and "FAIL (" in check.description
    assert " · Reports: " in check.description and "gate.html" in check.description


def test_golden_suite_replays_identically_at_chunk_level(pipeline_home):
    defs = build_definitions()
    tables = []
    for _ in range(2):
        assert _materialize(defs, partition="techdocs").success
        run = pq.read_table(_asset_file(pipeline_home, "bm25", "run", partition="techdocs"))
        metrics = pq.read_table(_asset_file(pipeline_home, "bm25", "metrics", partition="techdocs"))
        tables.append((run.to_pandas(), metrics.to_pandas()))
    (run_a, metrics_a), (run_b, metrics_b) = tables
    cols = ["query_id", "doc_id", "rank", "score"]
    pd.testing.assert_frame_equal(run_a[cols], run_b[cols])
    cols = ["query_id", "measure", "value"]
    pd.testing.assert_frame_equal(metrics_a[cols], metrics_b[cols])
    # Chunk ids of the suite's markdown_headers chunking, judged at chunk level.
    assert run_a["doc_id"].str.contains(":chunk:").all()
    levels = Warehouse(pipeline_home / "storage" / "rageval.duckdb").query(
        "SELECT DISTINCT level FROM runs WHERE dataset = 'techdocs'"
    )
    assert levels["level"].tolist() == ["chunk"]
    # The metrics judge evidence spans by the stored chunks (defs/assets/chunked.py): the same
    # extents as chunking the stored corpus again.
    stored = pq.read_table(_asset_file(pipeline_home, "bm25", "chunks", partition="techdocs"))
    corpus = pq.read_table(_asset_file(pipeline_home, "corpus", partition="techdocs"))
    reference = loaders.reference_chunking(pipeline_home / "data" / "suites" / "techdocs")
    again = chunk_corpus(corpus.to_pandas(), reference, "")
    cols = ["chunk_id", "doc_id", "start", "end"]
    pd.testing.assert_frame_equal(stored.to_pandas()[cols], again[cols])
    # Its chunk-level judgments are looked for among the reference chunks: none is missing.
    judgments = pq.read_metadata(_asset_file(pipeline_home, "qrels", partition="techdocs")).num_rows
    folder = pipeline_home / "storage" / "reports" / "quality" / "techdocs" / "bm25"
    reports = sorted(folder.glob("*.md"))
    assert reports
    for report in reports:
        assert f"**Qrels coverage (chunk level):** 0 of {judgments} judgments" in report.read_text()


USER_SEARCH = '''
"""A team's own search, as an entry point: titles that share a word with the query."""
import json
from pathlib import Path

_DOCS = [json.loads(line) for line in (Path(__file__).parent / "suites" / "beir-mini"
         / "corpus.jsonl").read_text().splitlines()]


def search(query, top_k):
    words = set(query.lower().split())
    scored = [(d["_id"], len(words & set(d["title"].lower().split()))) for d in _DOCS]
    return [(i, float(s)) for i, s in scored if s > 0][:top_k]
'''


def test_users_own_systems_run_file_and_entry_point(evaluated):
    """A run file made elsewhere scores exactly as the run it was written from; a Python
    entry point is timed per query and measured like any built-in system."""
    from rageval_pipeline.core.io.formats import write_trec_run

    _, _, home = evaluated
    data = home / "data"
    bm25_run = pq.read_table(_asset_file(home, "bm25", "run")).to_pandas()
    write_trec_run(bm25_run.assign(doc_id=bm25_run["source_id"]), data / "ours.trec", tag="ours")
    (data / "user_search.py").write_text(USER_SEARCH)
    (data / "systems.yaml").write_text(
        json.dumps(
            {
                "systems": {
                    "bm25": {"retriever": "bm25", "chunking": {"strategy": "reference"}},
                    "replay": {"retriever": "run_file", "path": "ours.trec"},
                    "titles": {"retriever": "python", "entry_point": "user_search:search"},
                }
            }
        )
    )
    defs = build_definitions()
    result = _materialize(defs, selection="key:replay/run+ or key:titles/run+")
    assert result.success
    warehouse = Warehouse(home / "storage" / "rageval.duckdb")
    means = warehouse.query(
        "SELECT system, measure, value FROM run_metrics WHERE measure IN ('nDCG@10', 'RR')"
    ).pivot(index="measure", columns="system", values="value")
    assert means["replay"].tolist() == pytest.approx(means["bm25"].tolist(), abs=1e-12)
    assert set(means.columns) == {"bm25", "replay", "titles"}
    latency = warehouse.query(
        "SELECT value FROM latency WHERE system = 'titles' AND attribute = 'all' AND stat = 'p50'"
    )
    assert latency["value"].iloc[0] >= 0


def test_history_lists_every_evaluation_oldest_first(evaluated, capsys):
    from rageval_pipeline.cli import main
    from rageval_pipeline.defs.resources import Settings

    defs, _, home = evaluated
    # Unforced, the unchanged evaluation would be reused: history keeps one row per evaluation.
    again = dg.materialize(
        list(defs.assets),
        selection="key:bm25/metrics",
        partition_key=PARTITION,
        resources=dict(defs.resources) | {"settings": Settings(force=True)},
    )
    assert again.success
    storage = str(home / "storage")
    assert main(["history", "--dataset", PARTITION, "-m", "MRR", "--storage", storage]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2
    assert rows[0][0] <= rows[1][0]
    assert {r[2] for r in rows} == {"bm25"} and {r[5] for r in rows} == {"RR"}
    assert rows[0][6] == rows[1][6]  # same inputs, same value
    assert main(["history", "--dataset", "nope", "--storage", storage]) == 2
    assert "no nDCG@10 for dataset 'nope'" in capsys.readouterr().err


def test_unreachable_archive_fails_the_ingest_step_with_the_url(
    pipeline_home, loopback, monkeypatch
):
    monkeypatch.setenv("RAGEVAL_BEIR_MIRROR", loopback.url)
    defs = build_definitions()
    result = _materialize(defs, selection="beir_archive", partition="scifact")
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    # One line (a dg.Failure's description), not chained to the NetworkError's trace.
    data = failure.step_failure_data
    assert (
        data.user_failure_data.description == f"{loopback.url}/scifact.zip: HTTP 404 (not retried)"
    )
    assert data.error.cause is None and data.error.context is None
    assert loopback.requests == ["/scifact.zip"]
    assert not (pipeline_home / "storage" / "archives" / "scifact.zip").exists()
