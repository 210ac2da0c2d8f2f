"""The report a person reads: the summary first, details folded, texts beside ids, a glossary,
dates with their timezone, trends per system, recommendations for knobs the system has."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from rageval_pipeline.core.gate import (
    CATEGORIES,
    GatePolicy,
    RunSummary,
    baseline_from_summary,
    decide,
)
from rageval_pipeline.core.gate.models import Listed
from rageval_pipeline.core.report import build_report, to_html, to_markdown
from rageval_pipeline.core.report.texts import SNIPPET, listed_ids, report_texts

N = 40
QUERIES = [f"q{i:03d}" for i in range(N)]
BM25 = {"retriever": "bm25", "k1": 1.5, "b": 0.75, "chunking": {"strategy": "reference"}}
HOSTILE = "rotate keys <script>alert(1)</script> | *now* [x](http://evil) `rm`"
LONG = "# Key rotation <b>bold</b> | cell " + "word " * 100


def run(system: str, config: dict, drop: float, when: str, top: dict | None = None):
    """Every fourth query at `drop` (nDCG@10 and R@100), the others at 1.0."""
    values = {q: (drop if i % 4 == 0 else 1.0) for i, q in enumerate(QUERIES)}
    mean = sum(values.values()) / N
    return RunSummary(
        dataset="techdocs",
        split="test",
        system=system,
        fingerprint=f"{system}-{config.get('k1', 0)}",
        run_id=f"{when}-{system}",
        created_at=f"2026-11-{when}T10:00:00+00:00",
        measures={"nDCG@10": mean, "R@100": mean, "RR(rel=2)": 0.5},
        per_query={q: {"nDCG@10": v, "R@100": v, "RR(rel=2)": 0.5} for q, v in values.items()},
        n_queries=N,
        k=10,
        config=config,
        top=top or {},
    )


BEFORE = {"q000": [Listed(id="d1:chunk:0", grade=2), Listed(id="d2:chunk:3", grade=0)]}
AFTER = {
    "q000": [
        Listed(id="d7:chunk:1", grade=None),
        Listed(id="d2:chunk:3", grade=0),
        Listed(id="d9:chunk:2", grade=1),
    ]
}
POLICY = GatePolicy.model_validate(
    {"datasets": {"default": {"compare": ["nDCG@10"], "statistics": {"resamples": 2000}}}}
)


@pytest.fixture
def changed():
    """bm25 with k1 0.3 loses nDCG@10 and R@100 on a quarter of the queries; hybrid gains."""
    old_bm25 = run("bm25", BM25, 1.0, "20", BEFORE)
    new_bm25 = run("bm25", BM25 | {"k1": 0.3}, 0.43, "25", AFTER)
    hybrid = {"retriever": "rrf", "k": 60, "members": {"bm25": BM25}}
    old_hybrid, new_hybrid = run("hybrid", hybrid, 0.43, "20"), run("hybrid", hybrid, 1.0, "25")
    baselines = {("techdocs", s.system): baseline_from_summary(s) for s in (old_bm25, old_hybrid)}
    verdict = decide([new_bm25, new_hybrid], baselines, POLICY)
    queries = pd.DataFrame({"query_id": QUERIES, "text": [HOSTILE] * N})
    chunks = pd.DataFrame(
        {"chunk_id": ["d1:chunk:0", "d9:chunk:2", "d5:chunk:0"], "text": [LONG] * 3}
    )
    ids = listed_ids([new_bm25, new_hybrid], baselines.values())["techdocs"]
    texts = report_texts("techdocs", queries, chunks, target_id="chunk_id", ids=ids)
    history = pd.DataFrame(
        [
            dict(
                created_at=pd.Timestamp(f"2026-11-{day}T10:00:00"),  # DuckDB: naive, UTC
                dataset="techdocs",
                split="test",
                system="bm25",
                fingerprint=fingerprint,
                run_id=f"{day}-bm25",
                measure="nDCG@10",
                value=value,
            )
            for day, fingerprint, value in (("20", "a", 1.0), ("22", "a", 0.99), ("25", "b", 0.86))
        ]
    )
    return build_report(verdict, [new_bm25, new_hybrid], baselines, history, texts)


class Page(HTMLParser):
    """Tags with how many <details> enclose them, section ids, and the glossary's terms."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.tags, self.sections, self.cells = 0, [], [], []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, self.depth))
        self.depth += tag == "details"
        if tag == "section":
            self.sections.append((dict(attrs)["id"], self.depth))
        if tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        self.depth -= tag == "details"
        if tag in ("td", "th") and self.cell is not None:
            self.cells.append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def parse(page: str) -> Page:
    parsed = Page()
    parsed.feed(page)
    return parsed


def test_summary_comes_first_with_verdict_config_diff_moved_measures_and_next_steps(changed):
    md = to_markdown(changed)
    summary = md.split("## Details", 1)[0]
    assert summary.startswith("# Retrieval gate: FAIL\n")
    # Compared with the stored baseline, dated when it was recorded (its run's own day).
    assert "| techdocs | bm25 | FAIL (ranking_shift) | stored baseline of 2026-11-20 |" in summary
    assert "| techdocs | hybrid | PASS, improved | stored baseline of 2026-11-20 |" in summary
    assert "| techdocs/bm25 | k1 | 1.5 | 0.3 |" in summary  # the config diff, old -> new
    moved = summary.split("## Measures that moved", 1)[1]
    ndcg = next(line for line in moved.splitlines() if "| techdocs/bm25 | nDCG@10 |" in line)
    assert re.search(r"\| -0\.1425 \[-0\.\d+, -0\.\d+\] \| [\d.e-]+ \| FAIL ranking_shift \|", ndcg)
    r100 = next(line for line in moved.splitlines() if "| techdocs/bm25 | R@100 |" in line)
    assert r100.endswith("| WARN recall_drop |")
    assert "| techdocs/hybrid | nDCG@10 |" in moved and "| IMPROVED |" in moved
    steps = summary.split("## What to do next", 1)[1]
    assert 'starting with q000 "rotate keys' in steps  # the worst query's text
    assert (
        "hybrid improved (nDCG@10, R@100): make it the baseline: rageval baseline update --dataset "
        'techdocs --system hybrid --note "improved: nDCG@10, R@100"'
    ) in steps.replace("\\", "")


def test_query_texts_and_snippets_are_escaped(changed):
    page, md = to_html(changed), to_markdown(changed)
    parsed = parse(page)
    assert not {"script", "b"} & {t for t, _ in parsed.tags}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    [lost] = [c for c in changed.runs[0].lost if c.query_id == "q000"]
    assert [d.id for d in lost.relevant_left] == ["d1:chunk:0"]
    assert [d.id for d in lost.relevant_entered] == ["d9:chunk:2"]
    assert set(lost.snippets) == {"d1:chunk:0", "d9:chunk:2"}
    assert all(len(s) <= SNIPPET for s in lost.snippets.values())
    # Markdown: no tag, no table-breaking pipe, no emphasis, link or code span from the data.
    assert re.search(r"(?<!\\)<(script|b)>", md) is None
    assert "\\| \\*now\\* [x\\](http://evil) \\`rm\\` |" in md  # in the worst-queries table
    row = next(line for line in md.splitlines() if line.startswith("| left | d1:chunk:0 |"))
    assert row.count(" | ") == 3  # Top 10 | target | grade | snippet: the pipe stayed text
    assert "| # Key rotation \\<b>bold\\</b> \\| cell word" in row


def test_glossary_explains_every_measure_abbreviation_and_category_shown(changed):
    page = to_html(changed)
    parsed = parse(page)
    start = parsed.cells.index("Term")
    terms = set(parsed.cells[start + 2 :: 2])
    shown = {c.measure for c in changed.verdict.checks if c.measure} - {"p50", "p95", "p99"}
    assert shown <= terms and "RR(rel=2)" in shown
    for word in ("MDE", "p (Holm)", "CI"):
        assert word in page and word in terms
    assert set(CATEGORIES) <= terms  # every category, a new one included
    assert {"recall_drop", "latency_regression", "unjudged_spike"} <= set(CATEGORIES)
    rr = next(e.meaning for e in changed.glossary if e.term == "RR(rel=2)")
    assert "Reciprocal rank" in rr and "rel=2: minimum label that counts as relevant" in rr


def test_every_date_carries_its_timezone(changed):
    md = to_markdown(changed)
    stamps = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d)?([+-]\d\d:\d\d|Z)?", md)
    assert stamps and all(stamps), stamps
    naive = changed.verdict.model_copy(update={"created_at": "2026-11-25T10:00:00"})
    assert "evaluated 2026-11-25T10:00:00+00:00" in to_markdown(naive)


def test_details_are_folded_and_the_summary_is_not(changed):
    parsed = parse(to_html(changed))
    assert [s for s, depth in parsed.sections] == [
        "verdict",
        "resolution",
        "config-diff",
        "moved",
        "next",
    ]
    assert all(depth == 0 for _, depth in parsed.sections)
    tables = [depth for tag, depth in parsed.tags if tag == "table"]
    assert tables[:4] == [0, 0, 0, 0] and all(d >= 1 for d in tables[4:]) and len(tables) > 6
    assert all(depth >= 1 for tag, depth in parsed.tags if tag in ("figure", "h3", "h4"))
    # The per-run table keeps only columns with values: no MDE/Threshold column of dashes.
    bm25 = to_markdown(changed).split("<summary>techdocs / test / bm25", 1)[1]
    header = next(line for line in bm25.splitlines() if line.startswith("| Metric |"))
    assert "Threshold" not in header and "MDE" in header


def test_trends_follow_each_system_over_time_and_mark_configuration_changes(changed):
    [trend] = [f for f in changed.figures if f.kind == "trend"]
    assert trend.name == "trend-techdocs-test-bm25"
    points = trend.data["measures"]["nDCG@10"]
    assert [t for t, _ in points] == [
        "2026-11-20T10:00:00+00:00",
        "2026-11-22T10:00:00+00:00",
        "2026-11-25T10:00:00+00:00",
    ]
    assert trend.data["changes"] == ["2026-11-25T10:00:00+00:00"]
    assert "trend-techdocs-test-bm25" in changed.runs[0].figures


def test_recommendations_name_only_the_knobs_the_system_has():
    from rageval_pipeline.core.report.explain import knobs

    assert knobs(BM25, "ranking") == {"k1": 1.5, "b": 0.75}
    assert knobs(BM25, "latency") == {}  # reference chunking: no size to turn
    dense = {"retriever": "dense", "model": "m", "batch_size": 32, "max_seq_length": 256}
    assert set(knobs(dense, "latency")) == {"max_seq_length", "model"}  # batch size: indexing
    rerank = {"retriever": "rerank", "depth": 100, "threshold": None, "candidates": BM25}
    assert knobs(rerank, "ranking") == {
        "threshold": None,
        "candidates.k1": 1.5,
        "candidates.b": 0.75,
    }
    fused = {"retriever": "weighted", "members": {"bm25": BM25 | {"weight": 0.3}}}
    assert knobs(fused, "ranking") == {
        "members.bm25.weight": 0.3,
        "members.bm25.k1": 1.5,
        "members.bm25.b": 0.75,
    }


def test_a_bm25_run_that_lost_precision_is_told_about_k1_and_b_not_a_reranker(changed):
    from rageval_pipeline.core.report.explain import recommendations

    old = run("bm25", BM25, 1.0, "20").model_copy(update={"measures": {"P@5": 0.6, "R@10": 0.8}})
    new = old.model_copy(update={"measures": {"P@5": 0.4, "R@10": 0.8}})
    [said] = recommendations(new, baseline_from_summary(old), changed.verdict)
    assert "k1 (now 1.5), b (now 0.75)" in said
    assert not any(word in said for word in ("threshold", "rerank", "depth", "batch"))
    rerank = {"retriever": "rerank", "threshold": 0.2, "depth": 50, "candidates": BM25}
    [said] = recommendations(
        new.model_copy(update={"config": rerank}), baseline_from_summary(old), changed.verdict
    )
    assert "threshold (now 0.2)" in said and "candidates.k1 (now 1.5)" in said


def test_report_texts_are_read_from_tables_and_bounded():
    queries = pd.DataFrame({"query_id": ["q2", "q1"], "text": ["second\nline", "first"]})
    corpus = pd.DataFrame({"doc_id": ["d1", "d2"], "title": ["t", "t"], "text": ["x " * 300, "y"]})
    texts = report_texts("hotel", queries, corpus, ids={"d1"})
    assert texts.query("hotel", "q2") == "second line" and texts.query("nfcorpus", "q2") is None
    assert texts.target("hotel", "d2") is None  # not listed: not copied into the report
    snippet = texts.target("hotel", "d1")
    assert len(snippet) == SNIPPET and snippet.endswith("…")
    with pytest.raises(ValueError, match="no column 'chunk_id'"):
        report_texts("hotel", queries, corpus, target_id="chunk_id")
    merged = texts.merged(report_texts("techdocs", queries))
    assert sorted(merged.queries) == ["hotel", "techdocs"] and merged.target("hotel", "d1")


def test_the_index_lists_each_datasets_latest_verdict_with_a_link(changed, tmp_path):
    from rageval_pipeline.core.report import write_index, write_reports

    passing = changed.verdict.model_copy(
        update={"checks": [c for c in changed.verdict.checks if c.system == "hybrid"]}
    )
    write_reports(changed, tmp_path / "techdocs" / "latest")
    write_reports(passing.model_copy(update={"created_at": "2026-11-24T09:00:00"}),
                  tmp_path / "hotel" / "latest")  # fmt: skip
    (tmp_path / "broken" / "latest").mkdir(parents=True)
    (tmp_path / "broken" / "latest" / "gate.json").write_text("{")
    paths = write_index(tmp_path)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert md.startswith("# Retrieval gate: 1 of 3 dataset(s) failing\n")
    assert "| broken | unreadable gate.json (not a verdict) |" in md
    assert (
        "| hotel | PASS, improved | – | 2026-11-24T09:00:00+00:00 | "
        "[hotel/latest/gate.html](hotel/latest/gate.html) |"
    ) in md
    assert "| techdocs | FAIL | ranking_shift, recall_drop |" in md
    page = paths["html"].read_text(encoding="utf-8")
    assert '<a href="techdocs/latest/gate.html">techdocs/latest/gate.html</a>' in page


def test_a_changed_suite_and_an_inconclusive_drop_say_what_to_do(changed):
    from rageval_pipeline.core.gate.models import RunChange

    verdict = changed.verdict
    suite = RunChange(
        dataset="techdocs",
        split="test",
        system="hybrid",
        fingerprint="f",
        suite_changed=True,
        compared_with="thresholds",
    )
    unsure = [
        c.model_copy(update={"inconclusive": True, "passed": False, "blocking": False})
        if c.system == "bm25" and c.kind in ("baseline", "watched") and not c.passed
        else c
        for c in verdict.checks
    ]
    report = changed.model_copy(
        update={"verdict": verdict.model_copy(update={"changes": [suite], "checks": unsure})}
    )
    summary = to_markdown(report).split("## Details", 1)[0]
    assert "| techdocs | bm25 | INCONCLUSIVE | – |" in summary
    assert "| techdocs | hybrid | PASS, improved | thresholds only |" in summary
    assert (
        "- techdocs/hybrid: the suite (corpus, queries or judgments) changed since the baseline; "
        "judged against the thresholds only."
    ) in summary
    # Both intervals lie below zero: a drop the data show, not yet told from the band.
    assert (
        "techdocs shows a drop on R@100, nDCG@10 (their intervals exclude zero) but cannot "
        "tell whether it reaches the band: add queries to the suite until it resolves the band"
    ) in summary
    assert 'techdocs --system hybrid --note "suite changed"' in summary
    # An interval reaching past zero: the suite cannot tell a drop of the band from none.
    straddling = [
        c.model_copy(update={"paired": c.paired.model_copy(update={"ci_high": 0.001})})
        if c.inconclusive and c.measure == "R@100"
        else c
        for c in unsure
    ]
    verdict = report.verdict.model_copy(update={"checks": straddling})
    summary = to_markdown(report.model_copy(update={"verdict": verdict})).split("## Details")[0]
    assert "techdocs shows a drop on nDCG@10 (its interval excludes zero)" in summary
    assert "techdocs cannot tell a drop of the band from none on R@100: add queries" in summary


def test_an_inconclusive_drop_after_a_configuration_change_is_not_offered_as_the_baseline(
    changed,
):
    verdict = changed.verdict
    assert any(c.system == "bm25" and c.config for c in verdict.changes)
    unsure = [
        c.model_copy(update={"inconclusive": True, "passed": False, "blocking": False})
        if c.system == "bm25" and c.kind in ("baseline", "watched") and not c.passed
        else c
        for c in verdict.checks
    ]
    report = changed.model_copy(update={"verdict": verdict.model_copy(update={"checks": unsure})})
    summary = to_markdown(report).split("## Details", 1)[0]
    assert "| techdocs | bm25 | INCONCLUSIVE |" in summary
    assert "techdocs/bm25: the configuration changed and may have made it worse" in summary
    assert "techdocs/bm25: the configuration changed and nothing got worse" not in summary
    assert 'techdocs --system bm25 --note "new config"' not in summary


def test_dashboards_plot_the_watched_measures_that_moved(changed):
    from rageval_pipeline.core.report import plotted_values

    values = plotted_values(changed.verdict)
    assert values["techdocs/bm25 R@100 delta"] == pytest.approx(-0.1425)
    assert values["techdocs/bm25 R@100 ci_high"] < 0
    assert "techdocs/bm25 RR(rel=2) delta" not in values  # watched, and it held


def test_a_latency_rise_the_pairs_do_not_establish_is_noise_not_an_inconclusive_run(changed):
    """An unchanged system timed on a loaded machine: its p95 rose, the interleaved pairs do not
    establish it (core/gate/latency.py). The run is not INCONCLUSIVE and nobody is told to add
    queries for it."""
    verdict = changed.verdict
    template = next(c for c in verdict.checks if c.system == "bm25")
    noisy = template.model_copy(
        update={
            "kind": "latency_baseline",
            "measure": "p95",
            "group": "intent=conceptual",
            "value": 990.0,
            "reference": 485.0,
            "passed": False,
            "blocking": False,
            "inconclusive": True,
            "improved": False,
            "category": None,
            "paired": None,
            "resolution": None,
        }
    )
    quiet = [c for c in verdict.checks if c.system != "bm25"] + [noisy]
    report = changed.model_copy(update={"verdict": verdict.model_copy(update={"checks": quiet})})
    summary = to_markdown(report).split("## Details", 1)[0]
    assert "| techdocs | bm25 | INCONCLUSIVE |" not in summary
    assert "cannot tell a drop of the band from none on p95" not in summary
    assert "techdocs/bm25: latency p95 [intent=conceptual] rose in its percentiles" in summary


def test_a_blocked_run_on_a_changed_suite_is_not_offered_as_the_baseline(changed):
    from rageval_pipeline.core.gate.models import RunChange

    verdict = changed.verdict
    assert any(c.system == "bm25" and c.blocking and not c.passed for c in verdict.checks)
    suite = RunChange(
        dataset="techdocs",
        split="test",
        system="bm25",
        fingerprint="f",
        suite_changed=True,
        compared_with="unchanged",
        unchanged=12,
    )
    report = changed.model_copy(update={"verdict": verdict.model_copy(update={"changes": [suite]})})
    summary = to_markdown(report).split("## Details", 1)[0]
    assert "--system bm25 --note" not in summary
    keep = "techdocs/bm25: the suite changed too; keep the baseline until this run passes"
    assert keep in summary


def test_a_measure_against_the_anchor_is_told_from_the_same_against_the_baseline(changed):
    """'Measures that moved' lists a drop against the baseline and against the anchor (on the
    queries unchanged since it) as two rows that say which is which."""
    verdict = changed.verdict
    failed = next(c for c in verdict.checks if c.kind == "baseline" and not c.passed)
    anchor = failed.model_copy(update={"kind": "anchor", "reference": 0.6025})
    report = changed.model_copy(
        update={"verdict": verdict.model_copy(update={"checks": [*verdict.checks, anchor]})}
    )
    moved = to_markdown(report).split("## Measures that moved", 1)[1].split("## ", 1)[0]
    run = f"| {failed.dataset}/{failed.system} | {failed.measure}"
    assert len([line for line in moved.splitlines() if line.startswith(f"{run} |")]) == 1
    assert f"{run} against the anchor on unchanged queries |" in moved
