"""One evaluated run: measured (checked against pytrec_eval) and stored (warehouse, Parquet
mirror, quality report) by the core alone, without Dagster."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
import pyarrow.parquet as pq
import pytest
import pytrec_eval

from rageval_pipeline.core.measures.aggregate import quality_report
from rageval_pipeline.core.results.store import RunRecord, measure_run, store_results
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE, Warehouse

QRELS = pd.DataFrame(
    {
        "split": "test",
        "query_id": ["q1", "q1", "q1", "q2", "q2", "q3"],
        "doc_id": ["a", "b", "c", "d", "e", "f"],
        "relevance": [2, 1, 0, 1, 2, 1],
        "level": "document",
    }
)
RUN = pd.DataFrame(
    {
        "query_id": ["q1"] * 4 + ["q2"] * 3 + ["q3"],
        "doc_id": ["b", "x", "a", "c", "y", "e", "d", "z"],
        "source_id": ["b", "x", "a", "c", "y", "e", "d", "z"],
        "rank": [1, 2, 3, 4, 1, 2, 3, 1],
        "score": [4.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 1.0],
        "latency_ms": [10.0] * 4 + [20.0] * 3 + [30.0],
    }
)
QUERIES = pd.DataFrame(
    {
        "query_id": ["q1", "q2", "q3"],
        "text": ["one", "two", "three"],
        "category": ["api", "api", "setup"],
        "difficulty": ["easy", "hard", "hard"],
    }
)
RECORD = RunRecord(
    dataset="mini",
    split="test",
    system="bm25",
    fingerprint="0123456789abcdef",
    k=10,
    config={"retriever": "bm25", "k1": 1.5},
    created_at=datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    dagster_run_id="dagster-1",
)
ORACLE = {"nDCG@10": "ndcg_cut_10", "RR": "recip_rank", "P@5": "P_5", "R@10": "recall_10"}


def _pytrec() -> dict[str, dict[str, float]]:
    qrels: dict = {}
    for r in QRELS.itertuples():
        qrels.setdefault(r.query_id, {})[r.doc_id] = int(r.relevance)
    run: dict = {}
    for r in RUN.itertuples():
        run.setdefault(r.query_id, {})[r.doc_id] = float(r.score)
    return pytrec_eval.RelevanceEvaluator(qrels, set(ORACLE.values())).evaluate(run)


def test_measure_run_equals_pytrec_eval():
    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    assert results.level == "document"
    oracle = _pytrec()
    got = results.per_query.set_index(["query_id", "measure"])["value"]
    for measure, name in ORACLE.items():
        for query_id, values in oracle.items():
            assert got[(query_id, measure)] == pytest.approx(values[name], abs=1e-12)
    means = dict(zip(results.means["measure"], results.means["value"], strict=True))
    assert means["RR"] == pytest.approx(sum(v["recip_rank"] for v in oracle.values()) / 3)
    p50 = results.latency.query("attribute == 'all' and stat == 'p50'")["value"].item()
    assert p50 == 20.0


def _table(warehouse: Warehouse, table: str) -> pd.DataFrame:
    return warehouse.query(f"SELECT * FROM {table} ORDER BY ALL")


def test_store_results_writes_warehouse_mirror_and_quality_report(tmp_path):
    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    stored = store_results(tmp_path, warehouse, RECORD, results, QUERIES)

    assert stored.run_id == "20260506T070809123456Z-mini-bm25"
    assert stored.means == dict(zip(results.means["measure"], results.means["value"], strict=True))
    [row] = _table(warehouse, "runs").to_dict("records")
    assert row.pop("created_at") == pd.Timestamp(RECORD.created_at).tz_localize(None)
    assert row == RECORD.model_dump(exclude={"created_at"}) | dict(
        run_id=stored.run_id,
        level="document",
        n_queries=3,
        config='{"k1": 1.5, "retriever": "bm25"}',
        finished=True,  # flipped once the mirror and reports were written
    )
    per_query = _table(warehouse, "query_metrics")
    expected = results.per_query.sort_values(["query_id", "measure"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(
        per_query.sort_values(["query_id", "measure"])[
            ["query_id", "measure", "value"]
        ].reset_index(drop=True),
        expected[["query_id", "measure", "value"]],
    )
    # The Parquet mirror holds exactly the warehouse's rows.
    for table in ("run_metrics", "query_metrics", "group_metrics", "latency"):
        path = (
            tmp_path
            / "tables"
            / table
            / "dataset=mini"
            / "system=bm25"
            / f"{stored.run_id}.parquet"
        )
        mirror = pq.read_table(path).to_pandas()
        db = _table(warehouse, table)
        assert len(mirror) == len(db) > 0
        cols = [c for c in db.columns if c != "created_at"]
        pd.testing.assert_frame_equal(
            mirror[cols].sort_values(cols).reset_index(drop=True),
            db[cols].sort_values(cols).reset_index(drop=True),
            check_dtype=False,
        )
    folder = tmp_path / "reports" / "quality" / "mini" / "bm25"
    report = quality_report(results.per_query, QUERIES)
    assert json.loads((folder / f"{stored.run_id}.json").read_text()) == report.model_dump()
    assert (folder / f"{stored.run_id}.md").read_text() == stored.quality_markdown
    assert stored.quality_markdown.startswith("### mini / bm25 (document level)\n")
    assert sorted(report.by_category) == ["api", "setup"]


def test_storing_the_same_run_again_replaces_it(tmp_path):
    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    counts = warehouse.query(
        "SELECT count(*) AS n FROM runs UNION ALL SELECT count(*) FROM query_metrics"
    )["n"].tolist()
    assert counts == [1, len(results.per_query)]


def test_a_run_read_back_equals_the_baseline_written_from_it(tmp_path):
    """Baselines are stored at 6 decimals; a run read back for judging carries the same
    precision, so comparing a run with its own baseline shows no change at all (not -5e-7)."""
    from rageval_pipeline.core.gate import baseline_from_summary, load_baseline, write_baseline
    from rageval_pipeline.core.history.summaries import select_runs, summaries

    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    [summary] = summaries(warehouse, select_runs(warehouse))
    write_baseline(baseline_from_summary(summary), tmp_path / "baseline.json")
    baseline = load_baseline(tmp_path / "baseline.json")
    assert summary.per_query == baseline.per_query
    assert summary.measures == baseline.measures


def test_a_dagster_run_selects_the_runs_it_measured_and_those_it_reused(tmp_path):
    from rageval_pipeline.core.history.summaries import select_runs

    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    stored = store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    assert select_runs(warehouse, dagster_run_id="dagster-2").empty
    assert not warehouse.record_reuse("no-such-run", "dagster-2", RECORD.created_at)
    assert warehouse.record_reuse(stored.run_id, "dagster-2", RECORD.created_at)
    for job in ("dagster-1", "dagster-2"):
        assert select_runs(warehouse, dagster_run_id=job)["run_id"].tolist() == [stored.run_id]
    assert select_runs(warehouse, dagster_run_id="dagster-3").empty
    assert warehouse.query("SELECT count(*) AS n FROM runs")["n"][0] == 1


def test_a_warehouse_written_before_reuse_still_selects_a_dagster_runs_runs(tmp_path):
    from rageval_pipeline.core.history.summaries import select_runs

    results = measure_run(RUN, QRELS, QUERIES, chunk_level=False)
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    stored = store_results(tmp_path, warehouse, RECORD, results, QUERIES)
    with warehouse.connect() as con:
        con.execute("DROP TABLE run_reuses")
    assert select_runs(warehouse, dagster_run_id="dagster-1")["run_id"].tolist() == [stored.run_id]
    assert select_runs(warehouse, dagster_run_id="dagster-2").empty
