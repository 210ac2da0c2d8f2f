"""Gate reports: JSON, Markdown and HTML carry the verdict, its failures and escape hostile text."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from rageval_pipeline.core.gate import (
    GatePolicy,
    RunSummary,
    Verdict,
    baseline_from_summary,
    decide,
)
from rageval_pipeline.core.report import to_html, to_json, to_markdown, write_reports


def summary(system: str, ndcg: float, query: str = "q1") -> RunSummary:
    return RunSummary(
        dataset="nfcorpus",
        split="test",
        system=system,
        fingerprint="cfg-1",
        run_id="run-1",
        created_at="2026-02-01T10:00:00+00:00",
        measures={"nDCG@10": ndcg, "R@100": 0.6},
        per_query={query: {"nDCG@10": ndcg}, "q2": {"nDCG@10": 0.5}},
        latency={"all": {"p50": 10.0, "p95": 30.0}},
        n_queries=2,
    )


def verdict_for(system: str, ndcg: float, query: str = "q1") -> Verdict:
    baseline = baseline_from_summary(summary(system, 0.3210, query))
    policy = GatePolicy.model_validate(
        {
            "datasets": {
                "default": {
                    "thresholds": {"nDCG@10": 0.25},
                    "latency_max_ms": {"p95": 500},
                    "statistics": {"rule": "point"},  # two queries: no interval would convince
                }
            }
        }
    )
    return decide([summary(system, ndcg, query)], {("nfcorpus", system): baseline}, policy)


@pytest.fixture
def failing() -> Verdict:
    return verdict_for("bm25", 0.2810)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    collector.close()
    return collector


def test_json_carries_verdict_failure_and_category(failing):
    data = json.loads(to_json(failing))
    assert data["passed"] is False
    assert data["categories"] == ["ranking_shift"]
    [failure] = [c for c in data["checks"] if not c["passed"] and c["blocking"]]
    assert failure["measure"] == "nDCG@10"
    assert failure["delta"] == pytest.approx(-0.04)
    assert data["worst_queries"][0]["query_id"] == "q1"
    # The Dagster layer may store the JSON and read it back as a Verdict.
    assert Verdict.model_validate_json(to_json(failing)) == failing


def test_json_is_stable(failing):
    text = to_json(failing)
    assert text == to_json(verdict_for("bm25", 0.2810))
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_markdown_has_headline_table_taxonomy_and_worst_queries(failing):
    md = to_markdown(failing)
    assert md.startswith("# Retrieval gate: FAIL\n")
    assert (
        "| Metric | Current [95% CI] | Baseline | Delta [CI] | p (Holm) | MDE | Threshold "
        "| Status |"
    ) in md
    # Two paired queries (q1 -0.04, q2 0): the exact sign-flip test cannot reject, p = 1.
    assert (
        "| nDCG@10 | 0.2810 | 0.3210 | -0.0200 [-0.0400, +0.0000] | 1 | 0.0560 | ≥ 0.2500 "
        "| FAIL ranking_shift (-12.5%) |"  # the first screen's label of the check
    ) in md
    # Latency has its own table, without the paired columns no latency row fills.
    assert "| Latency p95 [all] | 30.0 ms | 30.0 ms | ≤ 500.0 ms | PASS (+0.0%) |" in md
    assert "- [ranking_shift] nfcorpus/bm25 nDCG@10 = 0.2810 < baseline 0.3210" in md
    assert "delta -0.0400, -12.5%" in md
    assert "| q1 | nDCG@10 | 0.3210 | 0.2810 | -0.0400 |" in md


def test_markdown_of_a_passing_verdict():
    md = to_markdown(verdict_for("bm25", 0.3150))
    assert md.startswith("# Retrieval gate: PASS\n")
    assert "<summary>Every failure (0) and warning (0)</summary>\n\nNothing failed." in md
    assert "## Measures that moved (0)\n\nNo measure moved beyond tolerance." in md
    assert "FAIL" not in md.split("\n", 1)[0]


def test_markdown_keeps_hostile_names_literal():
    md = to_markdown(verdict_for("<script>", 0.2810, query="q|1"))
    assert "\\<script>" in md
    assert re.search(r"(?<!\\)<script>", md) is None  # every tag opener is backslash-escaped
    assert "| q\\|1 | nDCG@10 |" in md  # a pipe in a table cell must not split the row


def test_html_parses_and_escapes_hostile_names():
    page = to_html(verdict_for("<script>alert(1)</script>", 0.2810))
    parsed = parse(page)
    assert "script" not in parsed.tags
    assert {"html", "style", "h1", "table", "td"} <= set(parsed.tags)
    text = "".join(parsed.text)
    assert "<script>alert(1)</script>" in text  # shown to the reader as text
    assert "&lt;script&gt;" in page
    assert "nDCG@10" in text and "-12.5%" in text
    assert '<h1 class="fail">' in page


def test_html_is_self_contained(failing):
    page = to_html(failing)
    for external in ("src=", "href=", "http://", "https://", "@import", "url("):
        assert external not in page


def test_write_reports_writes_every_rendering_atomically(tmp_path, failing):
    paths = write_reports(failing, tmp_path / "reports")
    assert {fmt: p.name for fmt, p in paths.items()} == {
        "json": "gate.json",
        "report": "report.json",
        "markdown": "gate.md",
        "html": "gate.html",
    }
    assert paths["json"].read_text(encoding="utf-8") == to_json(failing)
    assert paths["markdown"].read_text(encoding="utf-8") == to_markdown(failing)
    assert paths["html"].read_text(encoding="utf-8") == to_html(failing)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        "gate.html",
        "gate.json",
        "gate.md",
        "manifest.json",  # the sizes of the files, the folder being swapped in whole
        "report.json",
    ]
