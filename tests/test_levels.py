"""Comparisons at the right level: `rageval compare` and the gate refuse to compare runs
scored at different levels (document vs chunk), in one line saying why."""

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.gate import GatePolicy, RunSummary, baseline_from_summary, decide
from rageval_pipeline.core.gate.baselines import Refused, baseline_path, promote, write_baseline
from rageval_pipeline.core.io import tables


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_compare_refuses_a_chunk_run_against_a_document_run(tmp_path, capsys):
    qrels = _write(
        tmp_path / "qrels.trec",
        ["Q1 0 guide:chunk:1 2", "Q1 0 guide:chunk:2 0", "Q2 0 faq:chunk:0 1"],
    )
    chunks = _write(
        tmp_path / "chunks.trec",
        ["Q1 Q0 guide:chunk:1 1 2.0 a", "Q1 Q0 faq:chunk:0 2 1.0 a", "Q2 Q0 faq:chunk:0 1 1.0 a"],
    )
    documents = _write(
        tmp_path / "documents.trec",
        ["Q1 Q0 guide 1 2.0 b", "Q1 Q0 faq 2 1.0 b", "Q2 Q0 faq 1 1.0 b"],
    )
    assert main(["compare", qrels, chunks, documents, "-m", "RR"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"error: {documents}: run A is scored at chunk level and run B at document level: "
        "their measures rank different units (documents vs chunks) and are not comparable; "
        "compare runs of one level (--document-level ranks a pipeline run's documents by their "
        "best chunk)\n"
    )
    # A pipeline chunk run (Parquet, with source ids) by document: one level, compared.
    pipeline = tmp_path / "run.parquet"
    frame = pd.DataFrame(
        {
            "query_id": ["Q1", "Q1", "Q2"],
            "doc_id": ["guide:chunk:1", "faq:chunk:0", "faq:chunk:0"],
            "source_id": ["guide", "faq", "faq"],
            "rank": [1, 2, 1],
            "score": [2.0, 1.0, 1.0],
            "latency_ms": [1.0, 1.0, 1.0],
        }
    )
    pq.write_table(tables.conform(frame, tables.RUN), pipeline)
    document_qrels = _write(tmp_path / "doc-qrels.trec", ["Q1 0 guide 2", "Q2 0 faq 1"])
    argv = ["compare", document_qrels, str(pipeline), documents, "-m", "RR", "--document-level"]
    assert main([*argv, "--permutations", "10"]) == 0
    # Two chunk runs: one level, compared.
    assert main(["compare", qrels, chunks, chunks, "-m", "RR", "--permutations", "10"]) == 0


def _summary(level: str | None, ndcg: float) -> RunSummary:
    return RunSummary(
        dataset="techdocs",
        split="test",
        system="bm25",
        fingerprint="cfg",
        run_id=f"run-{level}",
        created_at="2026-11-26T03:00:00+00:00",
        measures={"nDCG@10": ndcg},
        n_queries=10,
        level=level,
    )


def test_the_gate_refuses_to_judge_a_run_against_a_baseline_of_another_level():
    baseline = baseline_from_summary(_summary("chunk", 0.50))
    assert baseline.level == "chunk"  # recorded with the baseline
    baselines = {("techdocs", "bm25"): baseline}
    # Scored by document its nDCG@10 is higher, which says nothing about chunk retrieval.
    verdict = decide([_summary("document", 0.70)], baselines, GatePolicy())
    assert not verdict.passed
    [level] = [c for c in verdict.checks if c.kind == "level"]
    assert level.blocking and not level.passed
    assert level.message.startswith(
        "techdocs/bm25 was scored at document level and its baseline at chunk level: the gate "
        "refuses to compare them"
    )
    assert not [c for c in verdict.checks if c.kind == "baseline"]
    assert verdict.changes[0].compared_with == "thresholds"
    assert level.message.endswith(
        "re-record the baseline: rageval baseline update --dataset techdocs --system bm25 "
        '--force --note "scored at document level now"'
    )
    # Same level, or a baseline recorded before levels were: compared as ever.
    assert decide([_summary("chunk", 0.50)], baselines, GatePolicy()).passed
    old = {("techdocs", "bm25"): baseline.model_copy(update={"level": None})}
    assert decide([_summary("document", 0.50)], old, GatePolicy()).passed


def test_the_level_hint_names_the_update_that_works(tmp_path):
    """`baseline update` refuses a baseline at another level as worse: the hint's --force
    --note is what records it."""
    write_baseline(
        baseline_from_summary(_summary("chunk", 0.50)), baseline_path(tmp_path, "techdocs", "bm25")
    )
    run = _summary("document", 0.70)
    with pytest.raises(Refused):
        promote([run], tmp_path, GatePolicy())
    [done] = promote([run], tmp_path, GatePolicy(), force=True, note="scored at document level now")
    assert done.path == baseline_path(tmp_path, "techdocs", "bm25")
