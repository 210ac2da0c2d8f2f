"""A query the run dropped counts against it on every measure: 0 for a quality measure (as
nDCG's kernels score it), and for a cost (Tokens@k, unbounded above, lower is better) no value,
which the gate refuses to compare rather than read as the cheapest."""

from __future__ import annotations

import json

import pytest

from rageval_pipeline.core.gate import GatePolicy, RunSummary, decide
from rageval_pipeline.core.gate.baselines import baseline_from_summary
from rageval_pipeline.core.measures.spans import evaluate_spans
from rageval_pipeline.core.report import write_reports
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.suites.derived import EvidenceSet
from tests.test_derived_qrels import SPANS, WINDOWS, corpus
from tests.test_span_measures import run, values

MEASURES = ["EvidenceRecall@3", "Tokens@3"]


def _refused(constant: str):
    raise AssertionError(f"{constant} in gate.json")


ANSWERED = {"q1": ["a:chunk:0", "a:chunk:1", "b:chunk:0"], "q2": ["b:chunk:1", "a:chunk:0"]}


def _scored(rows: dict[str, list[str]], run_id: str) -> RunSummary:
    evidence = EvidenceSet.of(SPANS, corpus(), chunk_corpus(corpus(), WINDOWS, "t"))
    got = values(
        evaluate_spans(run(rows), evidence.spans, evidence.units, evidence.tokens, MEASURES)
    )
    per_query: dict[str, dict[str, float]] = {}
    for (query, measure), value in got.items():
        per_query.setdefault(query, {})[measure] = value
    means = {
        m: sum(v[m] for v in per_query.values() if m in v) / sum(m in v for v in per_query.values())
        for m in MEASURES
    }
    return RunSummary(
        dataset="d",
        split="test",
        system="s",
        fingerprint="f",
        run_id=run_id,
        created_at="2026-01-04T12:00:00+00:00",
        measures=means,
        per_query=per_query,
        n_queries=len(per_query),
    )


def test_a_dropped_query_has_no_cost_and_scores_zero_evidence():
    dropped = _scored({"q2": ANSWERED["q2"]}, "r")
    assert dropped.per_query["q1"] == {"EvidenceRecall@3": 0.0}  # no Tokens@3: not 0
    assert _scored(ANSWERED, "b").per_query["q1"]["Tokens@3"] == 12


@pytest.mark.parametrize("compare", [["Tokens@3"], None])
def test_a_run_that_drops_a_query_is_not_cheaper_in_the_gate(compare, tmp_path):
    """Compared, the cost blocks as not comparable; watched, it warns and is no gain."""
    policy = GatePolicy.model_validate({"datasets": {"default": {"compare": compare}}})
    baseline = baseline_from_summary(_scored(ANSWERED, "b"), rules=policy.rules_for("d"))
    dropped = _scored({"q2": ANSWERED["q2"]}, "r")
    assert dropped.measures["Tokens@3"] < baseline.measures["Tokens@3"]  # reads as a saving
    verdict = decide([dropped], {("d", "s"): baseline}, policy)
    [check] = [c for c in verdict.checks if c.measure == "Tokens@3" and c.kind != "spike"]
    assert check.kind == ("baseline" if compare else "watched")
    assert not check.passed and not check.improved and check.blocking is bool(compare)
    assert "no value for 1 of the baseline's queries (q1)" in check.message
    if compare:
        assert not verdict.passed and "baseline check" in verdict.summary
    write_reports(verdict, tmp_path)  # the dropped query has no value to write: strict JSON
    json.loads((tmp_path / "gate.json").read_text(), parse_constant=_refused)
    # Answering every query, the cost is compared as usual.
    same = decide([_scored(ANSWERED, "r")], {("d", "s"): baseline}, policy)
    [check] = [c for c in same.checks if c.measure == "Tokens@3" and c.kind != "spike"]
    assert "not comparable" not in check.message
