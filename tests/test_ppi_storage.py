"""PPI rows in the warehouse: stored beside the human-judged ones with their label source, read
back into run summaries, and judged by the gate's `ppi` rule; older warehouses still load."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.core.gate import GatePolicy, baseline_from_summary, decide
from rageval_pipeline.core.history.summaries import summaries
from rageval_pipeline.core.results.ppi_tables import ppi_tables
from rageval_pipeline.core.results.store import RunRecord, measure_run, store_results
from rageval_pipeline.core.statistics.ppi import nested, ppi_deltas, ppi_means
from rageval_pipeline.core.statistics.sampling import draw_sample
from rageval_pipeline.core.storage.warehouse import WAREHOUSE_FILE, Warehouse

N, HUMAN, DOCS = 40, 12, 4
FRAME = [f"q{i:02d}" for i in range(N)]
SAMPLE = draw_sample(FRAME, HUMAN)
QUERIES = pd.DataFrame({"query_id": FRAME, "text": FRAME})


def _qrels(grades: np.ndarray, queries: list[str]) -> pd.DataFrame:
    rows = [(q, f"{q}-d{d}", int(grades[FRAME.index(q), d])) for q in queries for d in range(DOCS)]
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])
    return frame.assign(split="test", level="document")


def _run(scores: np.ndarray) -> pd.DataFrame:
    rows = []
    for i, q in enumerate(FRAME):
        for rank, d in enumerate(np.argsort(-scores[i], kind="stable")):
            rows.append((q, f"{q}-d{d}", f"{q}-d{d}", rank + 1, float(scores[i, d]), 5.0))
    columns = ["query_id", "doc_id", "source_id", "rank", "score", "latency_ms"]
    return pd.DataFrame(rows, columns=columns)


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Warehouse, dict]:
    """A baseline run and a worse one, each scored with human qrels on the sample and LLM
    qrels on every query, stored with their PPI rows."""
    rng = np.random.default_rng(4)
    truth = rng.choice(3, size=(N, DOCS), p=[0.5, 0.3, 0.2])
    truth[:, 0] = np.maximum(truth[:, 0], 1)  # every query has a relevant document
    llm = np.clip(truth + (rng.random(truth.shape) < 0.25), 0, 2)
    human_qrels, llm_qrels = _qrels(truth, SAMPLE.drawn()), _qrels(llm, FRAME)
    warehouse = Warehouse(tmp_path / WAREHOUSE_FILE)
    values = {}
    for hour, noise in ((1, 0.3), (2, 1.5)):
        run = _run(truth + rng.normal(0, noise, truth.shape))
        human = measure_run(run, human_qrels, QUERIES, chunk_level=False)
        by_llm = measure_run(run, llm_qrels, QUERIES, chunk_level=False)
        estimates = ppi_means(nested(human.per_query), nested(by_llm.per_query), SAMPLE, ["RR"])
        record = RunRecord(
            dataset="synth",
            split="test",
            system="bm25",
            fingerprint=f"f{hour}",
            k=10,
            config={},
            created_at=datetime(2026, 11, 26, hour, tzinfo=UTC),
            human_sample=SAMPLE.model_dump_json(),
        )
        results = human._replace(
            ppi=ppi_tables(estimates, by_llm.per_query, SAMPLE, human.per_query)
        )
        store_results(tmp_path, warehouse, record, results, QUERIES)
        values[hour] = (nested(human.per_query), nested(by_llm.per_query), estimates["RR"])
    return warehouse, values


def test_ppi_rows_are_stored_beside_the_human_ones_with_their_label_source(stored):
    warehouse, values = stored
    rows = warehouse.query("SELECT * FROM ppi_metrics WHERE measure = 'RR' ORDER BY ALL")
    assert sorted(set(rows["label_source"])) == ["llm", "ppi"]
    ppi = rows[(rows["label_source"] == "ppi") & rows["run_id"].str.contains("T02")].iloc[0]
    estimate = values[2][2]
    assert (ppi["value"], ppi["ci_low"], ppi["ci_high"]) == pytest.approx(
        (estimate.estimate, estimate.ci_low, estimate.ci_high), abs=1e-12
    )
    assert (ppi["n_human"], ppi["n_llm"], ppi["frame_sha256"]) == (
        HUMAN,
        N,
        SAMPLE.frame_digest(),
    )
    sources = warehouse.query("SELECT DISTINCT label_source FROM run_metrics")["label_source"]
    assert sources.tolist() == ["human"]
    per_query = warehouse.query(
        "SELECT label_source, count(*) AS n FROM label_query_metrics WHERE measure = 'RR' "
        "GROUP BY ALL ORDER BY ALL"
    )
    assert per_query.values.tolist() == [["human", 2 * HUMAN], ["llm", 2 * N]]


def test_the_gate_judges_stored_runs_with_the_ppi_rule(stored):
    warehouse, values = stored
    runs = warehouse.query("SELECT * FROM runs WHERE finished ORDER BY created_at")
    [base, run] = summaries(warehouse, runs)
    assert run.human_sample == SAMPLE and set(run.llm_per_query) == set(FRAME)
    policy = GatePolicy.model_validate(
        {"datasets": {"default": {"statistics": {"rule": "ppi"}, "compare": ["RR"]}}}
    )
    verdict = decide([run], {("synth", "bm25"): baseline_from_summary(base)}, policy)
    [check] = [c for c in verdict.checks if c.kind == "baseline"]
    expected = ppi_deltas(
        (values[1][0], values[2][0]), (values[1][1], values[2][1]), SAMPLE, ["RR"]
    )["RR"]
    assert check.paired.n == N
    assert (check.paired.delta, check.paired.ci_low, check.paired.ci_high) == pytest.approx(
        (expected.estimate, expected.ci_low, expected.ci_high),
        abs=1e-5,  # stored at 6 decimals
    )


def test_a_warehouse_written_before_ppi_loads_and_gains_the_label_source(tmp_path: Path):
    path = tmp_path / WAREHOUSE_FILE
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE run_metrics (run_id VARCHAR, dataset VARCHAR, split VARCHAR, "
        "system VARCHAR, measure VARCHAR, value DOUBLE, created_at TIMESTAMP)"
    )
    con.execute("INSERT INTO run_metrics VALUES ('old', 'd', 'test', 's', 'RR', 0.5, NULL)")
    con.close()
    warehouse = Warehouse(path)
    with warehouse.connect():
        pass
    rows = warehouse.query("SELECT run_id, label_source FROM run_metrics")
    assert rows.to_dict("records") == [{"run_id": "old", "label_source": "human"}]
    assert warehouse.query("SELECT count(*) AS n FROM ppi_metrics")["n"][0] == 0
