"""Evidence measures at a token budget (issue 33): `EvidenceRecall@512t` and the like, against a
hand computation and a direct token-list computation."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures.defaults import DEFAULT_MEASURES, budget_measures
from rageval_pipeline.core.measures.names import parse_measure
from rageval_pipeline.core.measures.spans import evaluate_spans
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.suites.derived import EvidenceSet, Tokens
from tests.test_derived_qrels import SPANS, WINDOWS, corpus
from tests.test_span_measures import drawn_tables, extent, run, token_set, values

BUDGETED = ["EvidenceRecall", "TokenPrecision", "TokenIoU"]


def test_a_budget_is_written_after_the_at_sign_with_a_t():
    measure = parse_measure("evidence_recall@512T")
    assert (str(measure), measure.budget, measure.k) == ("EvidenceRecall@512t", 512, None)
    assert str(parse_measure("TokenPrecision(rel=2)@1024t")) == "TokenPrecision(rel=2)@1024t"
    assert parse_measure("TokenPrecision@1024t") != parse_measure("TokenPrecision@1024")
    assert parse_measure("EvidenceRecall@512t").family == "recall"
    for bad, why in [
        ("Tokens@512t", "Tokens takes no token budget"),
        ("nDCG@512t", "nDCG takes no token budget"),
        ("EvidenceRecall@0t", "greater than or equal to 1"),
    ]:
        with pytest.raises(InputError, match=why):
            parse_measure(bad)
    assert set(budget_measures()) <= set(DEFAULT_MEASURES)
    assert budget_measures([256]) == ("EvidenceRecall@256t", "TokenPrecision@256t")


def test_windows_cut_at_the_budget_match_the_hand_computation():
    evidence = EvidenceSet.of(SPANS, corpus(), chunk_corpus(corpus(), WINDOWS, "t"))
    # Windows of 4 tokens overlapping by 2: a:chunk:0 holds a0-a3, a:chunk:1 a2-a5,
    # b:chunk:0 b0-b3, b:chunk:1 b2-b5, c:chunk:2 c4-c7.
    ranked = run(
        {
            "q1": ["a:chunk:0", "a:chunk:1", "b:chunk:0", "c:chunk:2"],
            "q2": ["b:chunk:1", "a:chunk:0"],
        }
    )
    names = [f"{m}@{b}t" for m in BUDGETED for b in (4, 5, 6, 10, 14, 100)]
    got = values(evaluate_spans(ranked, evidence.spans, evidence.units, evidence.tokens, names))
    # q1's evidence: a1-a5, a7-a9 and c1-c10, 18 tokens.
    # 6 tokens: a0-a3, then a:chunk:1 cut to its first 2 tokens (a2-a3): 3 evidence tokens.
    assert got[("q1", "EvidenceRecall@6t")] == pytest.approx(3 / 18)
    assert got[("q1", "TokenPrecision@6t")] == pytest.approx(3 / 6)
    assert got[("q1", "TokenIoU@6t")] == pytest.approx(3 / (6 + 18 - 3))
    # 10: a0-a3, a2-a5 (a1-a5 is evidence), b0-b1: 5 of 10 tokens paid.
    assert got[("q1", "EvidenceRecall@10t")] == pytest.approx(5 / 18)
    assert got[("q1", "TokenPrecision@10t")] == pytest.approx(5 / 10)
    # 14: and b0-b3, and c:chunk:2 cut to c4-c5: 7 evidence tokens.
    assert got[("q1", "EvidenceRecall@14t")] == pytest.approx(7 / 18)
    assert got[("q1", "TokenPrecision@14t")] == pytest.approx(7 / 14)
    # 100: the whole list holds 16 tokens, all counted; precision divides by those 16.
    assert got[("q1", "EvidenceRecall@100t")] == pytest.approx(9 / 18)
    assert got[("q1", "TokenPrecision@100t")] == pytest.approx(9 / 16)
    # q2's evidence is a0: the first 4 tokens are b2-b5; the 5th is a0.
    assert got[("q2", "EvidenceRecall@4t")] == 0
    assert got[("q2", "EvidenceRecall@5t")] == 1
    assert got[("q2", "TokenPrecision@5t")] == pytest.approx(1 / 5)


def test_a_budget_compares_chunkings_a_rank_cutoff_cannot():
    # One answer (a1-a3) retrieved first by two chunkings: windows of 4 tokens and whole
    # documents. At 10 per query the document pays 10 tokens for it; at 4 tokens both pay 4.
    spans = SPANS[SPANS["query_id"] == "q1"].iloc[[0]]
    documents = EvidenceSet.of(spans, corpus(), None)
    windows = EvidenceSet.of(spans, corpus(), chunk_corpus(corpus(), WINDOWS, "t"))
    names = ["TokenPrecision@10", "TokenPrecision@4t", "EvidenceRecall@4t"]
    whole = values(
        evaluate_spans(run({"q1": ["a"]}), spans, documents.units, documents.tokens, names)
    )
    cut = values(
        evaluate_spans(run({"q1": ["a:chunk:0"]}), spans, windows.units, windows.tokens, names)
    )
    assert whole[("q1", "TokenPrecision@10")] == pytest.approx(3 / 10)
    assert cut[("q1", "TokenPrecision@10")] == pytest.approx(3 / 4)
    # At 4 tokens both are read as a0-a3: the same evidence at the same cost.
    for name in ("TokenPrecision@4t", "EvidenceRecall@4t"):
        assert whole[("q1", name)] == cut[("q1", name)]


def direct(spans: pd.DataFrame, extents: list[tuple[str, int, int]], budget: int) -> dict:
    """The definition on Python lists: every retrieved token in rank order, the first `budget`."""
    graded = spans[spans["relevance"] >= 1][["doc_id", "start", "end"]].values
    evidence = set().union(*(token_set(d, a, b) for d, a, b in graded))
    paid = [t for extent in extents for t in sorted(token_set(*extent))][:budget]
    hit = len(evidence & set(paid))
    union = len(paid) + len(evidence) - hit
    return {
        "EvidenceRecall": hit / len(evidence) if evidence else 0.0,
        "TokenPrecision": hit / len(paid) if paid else 0.0,
        "TokenIoU": hit / union if union else 0.0,
    }


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(st.tuples(extent(), st.integers(1, 3)), min_size=1, max_size=6),
    retrieved=st.lists(extent(), max_size=8),
    budget=st.integers(1, 40),
)
def test_budget_measures_equal_a_direct_token_list_computation(spans, retrieved, budget):
    table, units = drawn_tables(spans, retrieved)
    names = [f"{m}@{budget}t" for m in BUDGETED]
    got = values(
        evaluate_spans(run({"q": list(units["id"])}), table, units, Tokens.of(corpus()), names)
    )
    expected = direct(table, retrieved, budget)
    for measure in BUDGETED:
        assert got[("q", f"{measure}@{budget}t")] == pytest.approx(expected[measure])


def test_rageval_eval_scores_budget_measures_with_the_suites_spans(tmp_path, capsys):
    from rageval_pipeline.cli import main
    from rageval_pipeline.core.suites import loaders
    from tests.test_derived_qrels import TECHDOCS, techdocs

    docs, _, qrels, reference = techdocs()
    chunks = chunk_corpus(docs, reference, "t")
    # Each query's ten best sections, the best last: a run with something left to find.
    graded = qrels[qrels["level"] == "chunk"].sort_values(
        ["query_id", "relevance", "doc_id"], ascending=[True, False, True]
    )
    best = graded.groupby("query_id")["doc_id"].agg(lambda ids: list(ids)[:10][::-1])
    ranked = run(best.to_dict())
    (tmp_path / "run.trec").write_text(
        "".join(
            f"{q} Q0 {d} 0 {s} r\n" for q, d, s in ranked[["query_id", "doc_id", "score"]].values
        )
    )
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels[["query_id", "doc_id", "relevance"]].values)
    )
    argv = ["eval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.trec"), "--format", "csv"]
    names = ["EvidenceRecall@512t", "TokenPrecision@1024t", "nDCG@10"]
    assert main([*argv, *(x for n in names for x in ("-m", n)), "--suite", str(TECHDOCS)]) == 0
    got = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out)).set_index("measure")
    spans = loaders.load_part(TECHDOCS, "spans", dataset="techdocs")
    spans = spans[spans["query_id"].isin(qrels["query_id"])]
    evidence = EvidenceSet.of(spans, docs, chunks)
    direct = evaluate_spans(ranked, spans, evidence.units, evidence.tokens, names[:2])
    for name in names[:2]:
        mean = direct.loc[direct["measure"] == name, "value"].mean()
        assert got.loc[name, "value"] == pytest.approx(mean, abs=1e-6)
    assert 0 < got.loc["EvidenceRecall@512t", "value"] < 1
    # Without the suite: one line naming the option, exit 2.
    assert main([*argv, "-m", "EvidenceRecall@512t"]) == 2
    assert "name their suite with --suite" in capsys.readouterr().err
