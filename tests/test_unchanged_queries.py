"""Suite growth never stops the comparison: per-query digests of what decides each value, and a
baseline of another suite version compared on the unchanged queries with the paired statistics;
too few unchanged queries block."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import GatePolicy, RunSummary, decide
from rageval_pipeline.core.gate.baselines import baseline_from_summary, promote
from rageval_pipeline.core.gate.unchanged import MIN_UNCHANGED
from rageval_pipeline.core.results.store import query_digests


def _tables(queries: dict[str, str], judged: dict[str, dict[str, int]]):
    qrels = pd.DataFrame(
        [(q, d, g) for q, docs in judged.items() for d, g in docs.items()],
        columns=["query_id", "doc_id", "relevance"],
    )
    texts = pd.DataFrame(list(queries.items()), columns=["query_id", "text"])
    return qrels, texts


def test_a_query_digest_moves_with_its_text_judgments_and_spans_only():
    queries = {"q1": "how to retry", "q2": "timeouts"}
    judged = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1}}
    spans = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "start": [0], "end": [9]})
    first = query_digests(*_tables(queries, judged), spans)
    assert set(first) == {"q1", "q2"}
    # The same suite written in another order is the same.
    qrels, texts = _tables(queries, judged)
    assert query_digests(qrels.iloc[::-1], texts.iloc[::-1], spans) == first
    for edited in (
        _tables({**queries, "q1": "how to retry?"}, judged),
        _tables(queries, {**judged, "q1": {"a": 1, "b": 0}}),
        _tables(queries, {**judged, "q1": {"a": 2, "b": 0, "z": 0}}),  # a corpus id named more
    ):
        moved = query_digests(*edited, spans)
        assert moved["q1"] != first["q1"] and moved["q2"] == first["q2"]
    moved = query_digests(*_tables(queries, judged), spans.assign(end=[10]))
    assert moved["q1"] != first["q1"] and moved["q2"] == first["q2"]


def _summary(values: dict[str, float], digests: dict[str, str], suite: str, run_id: str):
    return RunSummary(
        dataset="own",
        split="test",
        system="ours",
        fingerprint="team",
        run_id=run_id,
        created_at="2026-03-01T10:00:00+00:00",
        measures={"nDCG@10": float(np.mean(list(values.values())))},
        per_query={q: {"nDCG@10": v} for q, v in values.items()},
        n_queries=len(values),
        suite=suite,
        query_digests=digests,
    )


RNG = np.random.default_rng(11)
OLD = {f"q{i:02d}": round(float(v), 6) for i, v in enumerate(RNG.uniform(0.5, 0.9, 12))}
ADDED = {f"n{i:02d}": round(float(v), 6) for i, v in enumerate(RNG.uniform(0.5, 0.9, 13))}
DIGESTS = {q: f"d-{q}" for q in [*OLD, *ADDED]}


def _baseline():
    old = _summary(OLD, {q: DIGESTS[q] for q in OLD}, "suite-v1", "base")
    return baseline_from_summary(old, rules=GatePolicy().rules_for("own"))


def test_a_grown_suite_compares_the_unchanged_queries_and_blocks_a_broken_system():
    baseline = _baseline()
    # 13 queries added in the same change as a retriever cut short: about half its value.
    broken = {q: round(v * 0.53, 6) for q, v in {**OLD, **ADDED}.items()}
    verdict = decide(
        [_summary(broken, DIGESTS, "suite-v2", "run")], {("own", "ours"): baseline}, GatePolicy()
    )
    assert not verdict.passed
    [change] = verdict.changes
    assert (change.compared_with, change.unchanged, change.suite_changed) == ("unchanged", 12, True)
    [ndcg] = [c for c in verdict.checks if c.kind == "baseline" and c.measure == "nDCG@10"]
    assert ndcg.blocking and not ndcg.passed and ndcg.paired.n == 12
    assert ndcg.reference == pytest.approx(np.mean(list(OLD.values())), abs=1e-6)
    [suite] = [c for c in verdict.checks if c.kind == "suite"]
    assert not suite.blocking and "13 added (n00, n01" in suite.message
    assert "on the 12 unchanged queries" in suite.message
    # The added queries are scored: the run's reported value is over all 25.
    [value] = [c for c in verdict.checks if c.kind == "value" and c.measure == "nDCG@10"] or [None]
    assert value is None  # nDCG@10 is compared, so reported by its baseline check only

    # The unchanged system on the grown suite passes: nothing moved on the 12 it shares.
    same = {**OLD, **ADDED}
    verdict = decide(
        [_summary(same, DIGESTS, "suite-v2", "run")], {("own", "ours"): baseline}, GatePolicy()
    )
    assert verdict.passed, verdict.summary

    # A re-judged query is changed, not compared: its drop does not count.
    rejudged = {**DIGESTS, "q00": "d-q00-regraded"}
    moved = {**same, "q00": 0.0}
    verdict = decide(
        [_summary(moved, rejudged, "suite-v2", "run")], {("own", "ours"): baseline}, GatePolicy()
    )
    assert verdict.passed and verdict.changes[0].unchanged == 11
    assert "1 changed (q00)" in next(c for c in verdict.checks if c.kind == "suite").message


@pytest.mark.parametrize("kept", [MIN_UNCHANGED - 1, 0])
def test_too_few_unchanged_queries_block_and_say_how_many(kept):
    baseline = _baseline()
    digests = {q: (d if i < kept else d + "-new") for i, (q, d) in enumerate(DIGESTS.items())}
    run = _summary({**OLD, **ADDED}, digests, "suite-v2", "run")
    verdict = decide([run], {("own", "ours"): baseline}, GatePolicy())
    assert not verdict.passed
    [suite] = [c for c in verdict.checks if c.kind == "suite"]
    assert suite.blocking and f"only {kept} of its queries are unchanged" in suite.message
    assert f"fewer than {MIN_UNCHANGED} queries" in suite.message
    # At the minimum it compares.
    digests = {
        q: (d if i < MIN_UNCHANGED else d + "-new") for i, (q, d) in enumerate(DIGESTS.items())
    }
    run = _summary({**OLD, **ADDED}, digests, "suite-v2", "run")
    verdict = decide([run], {("own", "ours"): baseline}, GatePolicy())
    assert verdict.passed and verdict.changes[0].unchanged == MIN_UNCHANGED


def test_baseline_update_refuses_the_broken_system_on_the_unchanged_queries(tmp_path):
    policy = GatePolicy()
    promote([_summary(OLD, {q: DIGESTS[q] for q in OLD}, "suite-v1", "base")], tmp_path, policy)
    broken = {q: round(v * 0.53, 6) for q, v in {**OLD, **ADDED}.items()}
    with pytest.raises(
        InputError, match=r"refusing a worse baseline \(own/ours nDCG@10 .* over 12 queries"
    ):
        promote([_summary(broken, DIGESTS, "suite-v2", "run")], tmp_path, policy)
    [done] = promote(
        [_summary(broken, DIGESTS, "suite-v2", "run")], tmp_path, policy, accept_worse="cut short"
    )
    assert done.baseline.accepted_worse == "cut short"
    assert done.baseline.query_digests == DIGESTS
