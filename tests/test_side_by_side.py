"""The baseline's configuration timed beside a system: interleaved, both timings kept, and
fusion summing its members' timings for both (docs/gate.md, "Latency, side by side")."""

from __future__ import annotations

import pandas as pd

from rageval_pipeline.core.measures.aggregate import latency_stats
from rageval_pipeline.core.retrieval import Hit, execute
from rageval_pipeline.core.retrieval.fusion import rrf

QUERIES = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "text": ["a", "b", "c", "d"]})


def test_each_query_is_timed_through_both_in_alternating_order():
    calls: list[tuple[str, str]] = []

    def system(text: str, k: int) -> list[Hit]:
        calls.append(("system", text))
        return [Hit(f"{text}-doc", 1.0)]

    def baseline(text: str, k: int) -> list[Hit]:
        calls.append(("baseline", text))
        return [Hit("never-listed", 9.0)]

    run = execute(system, QUERIES, 10, baseline=baseline)
    # ABBA: neither side always runs first (warm caches, a core freed by the other's end).
    assert [who for who, _ in calls] == ["system", "baseline", "baseline", "system"] * 2
    assert run["doc_id"].tolist() == ["a-doc", "b-doc", "c-doc", "d-doc"]  # system's hits only
    assert run["baseline_latency_ms"].notna().all() and run["latency_ms"].notna().all()
    stats = latency_stats(run)
    assert sorted(set(stats["timed"])) == ["baseline", "paired", "system"]  # pairs: the ratios
    assert execute(system, QUERIES, 10)["baseline_latency_ms"].isna().all()


def _member(latency: float, beside: float | None) -> pd.DataFrame:
    return pd.DataFrame(
        dict(
            query_id=["q1"],
            doc_id=["x"],
            source_id=["x"],
            score=[1.0],
            latency_ms=[latency],
            baseline_latency_ms=[beside],
        )
    )


def test_fusion_sums_both_timings_and_is_untimed_beside_when_a_member_is():
    fused = rrf([_member(2.0, 3.0), _member(5.0, 7.0)], level="chunk")
    assert fused["latency_ms"].tolist() == [7.0] and fused["baseline_latency_ms"].tolist() == [10.0]
    partly = rrf([_member(2.0, 3.0), _member(5.0, None)], level="chunk")
    assert partly["baseline_latency_ms"].isna().all()
