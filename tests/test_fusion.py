import pandas as pd
import pytest

from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.ranking import order_run, to_document_level
from rageval_pipeline.core.retrieval.fusion import rrf, weighted


def run(rows: list[tuple], latency: dict[str, float] | None = None) -> pd.DataFrame:
    """rows: (query_id, doc_id, score[, source_id]); doc_id None marks an empty query."""
    records = []
    for qid, did, score, *source in rows:
        records.append(
            dict(
                query_id=qid,
                doc_id=did,
                source_id=source[0] if source else did,
                score=score,
                latency_ms=(latency or {}).get(qid, 1.0),
            )
        )
    frame = pd.DataFrame.from_records(records).assign(rank=None)
    return tables.conform(order_run(frame), tables.RUN).to_pandas()


def ranked(fused: pd.DataFrame, qid: str = "q") -> list[tuple[str, float]]:
    rows = fused[fused["query_id"] == qid]
    return [(d, round(s, 6)) for d, s in zip(rows["doc_id"], rows["score"], strict=True)]


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    a = run([("q", "d1", 9.0), ("q", "d2", 5.0), ("q", "d3", 1.0)])
    b = run([("q", "d3", 0.9), ("q", "d1", 0.8)])
    fused = rrf([a, b], k=60)
    assert ranked(fused) == [
        ("d1", round(1 / 61 + 1 / 62, 6)),
        ("d3", round(1 / 63 + 1 / 61, 6)),
        ("d2", round(1 / 62, 6)),
    ]
    assert fused["rank"].tolist() == [1, 2, 3]
    assert list(fused.columns) == tables.RUN.names


def test_rrf_k_changes_the_scores():
    a, b = run([("q", "x", 2.0), ("q", "y", 1.0)]), run([("q", "y", 2.0)])
    assert ranked(rrf([a, b], k=1))[0] == ("y", round(1 / 3 + 1 / 2, 6))


def test_ties_are_broken_by_id_descending_whatever_the_member_order():
    a = run([("q", "apple", 2.0), ("q", "banana", 1.0)])
    b = run([("q", "banana", 2.0), ("q", "apple", 1.0)])
    for members in ([a, b], [b, a]):
        assert [d for d, _ in ranked(rrf(members))] == ["banana", "apple"]
    pd.testing.assert_frame_equal(rrf([a, b]), rrf([b, a]))


def test_latency_is_the_sum_of_the_members_latencies():
    a = run([("q", "x", 1.0), ("r", "x", 1.0)], latency={"q": 10.0, "r": 1.0})
    b = run([("q", "y", 1.0), ("r", "y", 1.0)], latency={"q": 2.5, "r": 3.0})
    fused = rrf([a, b])
    assert fused.groupby("query_id")["latency_ms"].unique().map(list).to_dict() == {
        "q": [12.5],
        "r": [4.0],
    }


def test_query_empty_in_every_member_keeps_one_null_row():
    a = run([("q", None, None), ("r", "x", 1.0)], latency={"q": 4.0})
    b = run([("q", None, None), ("r", None, None)], latency={"q": 6.0})
    fused = rrf([a, b])
    empty = fused[fused["query_id"] == "q"]
    assert len(empty) == 1 and empty["doc_id"].isna().all() and empty["rank"].isna().all()
    assert empty["latency_ms"].iloc[0] == 10.0
    assert ranked(fused, "r") == [("x", round(1 / 61, 6))]


def test_fused_run_is_as_deep_as_the_deepest_member():
    a = run([("q", f"a{i}", 10.0 - i) for i in range(3)])
    b = run([("q", f"b{i}", 10.0 - i) for i in range(2)])
    fused = rrf([a, b])
    assert len(fused) == 3
    assert [d for d, _ in ranked(fused)] == ["b0", "a0", "b1"]


def test_weighted_fusion_min_max_normalises_per_query():
    a = run([("q", "x", 10.0), ("q", "y", 5.0), ("q", "z", 0.0), ("r", "x", 3.0)])
    b = run([("q", "z", 0.9), ("q", "y", 0.7), ("q", "x", 0.4)])
    fused = weighted([a, b], [0.25, 0.75])
    assert ranked(fused) == [
        ("z", 0.75),  # a: 0, b: 1
        ("y", round(0.25 * 0.5 + 0.75 * 0.6, 6)),
        ("x", 0.25),  # a: 1, b: 0
    ]
    # A single result (max == min) normalises to 1: the member's best answer.
    assert ranked(fused, "r") == [("x", 0.25)]


def test_weighted_fusion_validates_weights():
    a, b = run([("q", "x", 1.0)]), run([("q", "y", 1.0)])
    with pytest.raises(ValueError, match="2 weights for 3 runs"):
        weighted([a, b, a], [1, 1])
    with pytest.raises(ValueError, match="weights must be"):
        weighted([a, b], [0, 0])
    with pytest.raises(ValueError, match="weights must be"):
        weighted([a, b], [1, -1])


def test_fusion_needs_two_runs_and_a_known_level():
    a = run([("q", "x", 1.0)])
    with pytest.raises(ValueError, match="at least two"):
        rrf([a])
    with pytest.raises(ValueError, match="level"):
        rrf([a, a], level="passage")
    with pytest.raises(ValueError, match="positive"):
        rrf([a, a], k=0)


def test_collapse_keeps_each_documents_best_chunk():
    chunked = run(
        [
            ("q", "d1:chunk:0", 0.2, "d1"),
            ("q", "d2:chunk:0", 0.5, "d2"),
            ("q", "d1:chunk:3", 0.9, "d1"),
        ]
    )
    collapsed = to_document_level(chunked, keep_scores=True)
    assert ranked(collapsed) == [("d1", 0.9), ("d2", 0.5)]
    assert collapsed["source_id"].tolist() == ["d1", "d2"]
    assert collapsed["rank"].tolist() == [1, 2]


def test_document_level_fuses_members_with_different_chunkings():
    paragraphs = run(
        [
            ("q", "d1:chunk:1", 0.9, "d1"),
            ("q", "d1:chunk:0", 0.8, "d1"),
            ("q", "d2:chunk:0", 0.7, "d2"),
        ]
    )
    whole = run([("q", "d2:chunk:0", 5.0, "d2"), ("q", "d1:chunk:0", 4.0, "d1")])
    by_document = rrf([paragraphs, whole], level="document")
    # d1 is 1st then 2nd, d2 2nd (after collapsing) then 1st: tie, broken by id.
    tied = round(1 / 61 + 1 / 62, 6)
    assert ranked(by_document) == [("d2", tied), ("d1", tied)]
    by_chunk = rrf([paragraphs, whole], level="chunk")
    assert ranked(by_chunk) == [
        ("d2:chunk:0", round(1 / 63 + 1 / 61, 6)),
        ("d1:chunk:0", round(2 / 62, 6)),
        ("d1:chunk:1", round(1 / 61, 6)),
    ]
