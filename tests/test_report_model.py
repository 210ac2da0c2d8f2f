"""The report model: systems side by side, explanations, recommendations, plots, seed 003."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.gate import (
    GatePolicy,
    RunSummary,
    baseline_from_summary,
    decide,
    decide_validation,
    load_policy,
)
from rageval_pipeline.core.report import (
    build_report,
    draw,
    draw_figures,
    to_html,
    to_markdown,
    write_reports,
)
from rageval_pipeline.core.report.plots import UNUSED_DAYS, render, render_cached
from rageval_pipeline.core.report.validation import validation_report

GATE_YAML = Path(__file__).parent.parent / "data" / "gate.yaml"
SEED_P5 = "{kind: query_share, measure: P@5, min: 0.80, share: 0.80}"

QUERIES = [f"q{i}" for i in range(1, 9)]


def run(system: str, ndcg: list[float], p5: float, r10: float, top: dict, when: str) -> RunSummary:
    return RunSummary(
        dataset="hotel",
        split="test",
        system=system,
        fingerprint="f" + system,
        run_id=f"{when}-{system}",
        created_at=f"2026-01-0{when}T12:00:00+00:00",
        measures={"nDCG@10": sum(ndcg) / len(ndcg), "P@5": p5, "R@10": r10, "RR": 0.75},
        per_query={
            q: {"nDCG@10": v, "P@5": p5 if i % 2 else 1.0, "R@10": r10}
            for i, (q, v) in enumerate(zip(QUERIES, ndcg, strict=True))
        },
        intervals={"nDCG@10": (0.3, 0.9), "P@5": (p5 - 0.1, p5 + 0.1)},
        latency={
            "all": {"mean": 12.0, "p50": 10.0, "p95": 30.0, "p99": 40.0},
            "intent=factual": {"mean": 9.0, "p50": 8.0, "p95": 20.0, "p99": 25.0},
            "intent=procedural": {"mean": 15.0, "p50": 14.0, "p95": 35.0, "p99": 45.0},
            "difficulty=easy": {"mean": 5.0, "p50": 5.0, "p95": 6.0, "p99": 7.0},
        },
        n_queries=8,
        k=10,
        config={"retriever": "rerank", "threshold": 0.5, "candidates": {"retriever": "bm25"}},
        top=top,
    )


BEFORE = {"q1": [{"id": "a", "grade": 3}, {"id": "b", "grade": None}, {"id": "c", "grade": 1}]}
AFTER = {"q1": [{"id": "b", "grade": None}, {"id": "d", "grade": 0}, {"id": "a", "grade": 3}]}


@pytest.fixture
def context():
    """bm25 gets worse on q1 and q2 (precision falls, recall holds), better on q8; the other
    queries do not move."""
    old = run("bm25", [0.9, 0.8, 0.5, 0.5, 0.5, 0.5, 0.5, 0.2], 0.6, 0.8, BEFORE, "1")
    new = run("bm25", [0.3, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5, 0.7], 0.4, 0.8, AFTER, "2")
    other = run("dense", [0.6] * 8, 0.5, 0.7, {}, "2")
    baselines = {("hotel", "bm25"): baseline_from_summary(old)}
    verdict = decide([new, other], baselines, GatePolicy.model_validate({"version": 1}))
    history = pd.DataFrame(
        [
            dict(
                created_at=pd.Timestamp(s.created_at),
                dataset="hotel",
                split="test",
                system=s.system,
                fingerprint=s.fingerprint,
                run_id=s.run_id,
                measure=m,
                value=v,
            )
            for s in (old, new, other)
            for m, v in s.measures.items()
        ]
    )
    return build_report(verdict, [new, other], baselines, history), new


def test_systems_side_by_side_and_explanations(context):
    report, new = context
    assert report.columns == ["hotel/bm25", "hotel/dense"]
    row = next(r for r in report.rows if r.measure == "nDCG@10")
    assert row.cells[0].delta == pytest.approx((4.1 - 4.4) / 8) and row.cells[1].delta is None
    for row in report.rows:  # each cell is the run's own mean
        assert row.cells[0].value == pytest.approx(new.measures[row.measure])
    latency = next(f for f in report.figures if f.kind == "latency")
    assert latency.data["groups"] == ["all", "intent=factual", "intent=procedural"]
    section = report.runs[0]
    assert [c.query_id for c in section.lost] == ["q1", "q2"]  # only queries that got worse
    assert [c.query_id for c in section.gained] == ["q8"]
    q1 = section.lost[0]
    assert [d.id for d in q1.entered] == ["d"] and [d.id for d in q1.left] == ["c"]
    assert [(m.id, m.before, m.after) for m in q1.moves] == [("b", 2, 1), ("a", 1, 3)]
    [threshold] = [r for r in section.recommendations if "threshold" in r]
    assert "Precision fell" in threshold and "threshold (now 0.5)" in threshold
    assert any("No baseline" in r for r in report.runs[1].recommendations)


def test_figures_cover_every_kind_and_render_deterministically(context, tmp_path):
    report, _ = context
    kinds = sorted({f.kind for f in report.figures})
    assert kinds == ["latency", "measures", "per_query", "trend"]
    per_query = next(f for f in report.figures if f.kind == "per_query")
    assert per_query.data["delta"] == sorted(per_query.data["delta"])
    trend = next(f for f in report.figures if f.name == "trend-hotel-test-bm25")
    assert len(trend.data["measures"]["nDCG@10"]) == 2  # bm25's two stored runs
    # dense has one stored evaluation: no trend (its values are its measures figure's).
    assert not any(f.name == "trend-hotel-test-dense" for f in report.figures)
    assert "trend-hotel-test-dense" not in report.runs[1].figures
    # An interval that misses its value (rounding, an older baseline's) still draws.
    odd = next(f for f in report.figures if f.kind == "measures").model_copy(deep=True)
    odd.data["current_ci"][0] = [odd.data["current"][0] + 0.01, odd.data["current"][0] + 0.02]
    assert render(odd).startswith("<svg")
    svg = render(per_query)
    assert svg.startswith("<svg") and render(per_query) == svg
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "per_query-hotel-test-removed.svg").write_text("<svg/>")
    paths = write_reports(report, tmp_path, drawn=draw(report))
    again = write_reports(report, tmp_path / "again", drawn=draw(report))
    for what, path in paths.items():
        assert path.read_bytes() == again[what].read_bytes(), what
    plots = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert plots == sorted(f"{f.name}.svg" for f in report.figures)  # the earlier one is gone
    assert json.loads(paths["report"].read_text())["runs"][0]["lost"][0]["query_id"] == "q1"


def test_cached_figures_are_the_drawn_bytes_and_only_changed_ones_are_drawn(
    context, tmp_path, monkeypatch
):
    report, _ = context
    cache = tmp_path / "cache"
    drawn = render_cached(report.figures, cache)
    assert drawn == {f.name: render(f) for f in report.figures}
    assert len(list(cache.iterdir())) == len(report.figures)

    calls = []
    monkeypatch.setattr(
        "rageval_pipeline.core.report.plots.render", lambda f: calls.append(f) or render(f)
    )
    assert render_cached(report.figures, cache) == drawn and calls == []
    changed = report.figures[0].model_copy(update={"title": "another title"})
    again = render_cached([changed, *report.figures[1:]], cache)
    assert calls == [changed] and again[changed.name] == render(changed)
    # Shared by every report of the storage: the figure drawn before stays until unused.
    assert len(list(cache.iterdir())) == len(report.figures) + 1
    old = time.time() - (UNUSED_DAYS + 1) * 86400
    for path in cache.iterdir():
        os.utime(path, (old, old))
    assert render_cached(report.figures, cache) == drawn and calls == [changed]
    assert len(list(cache.iterdir())) == len(report.figures)  # read now: kept; the other dropped
    cached = write_reports(report, tmp_path / "a", drawn=draw(report, cache))
    plain = write_reports(report, tmp_path / "b", drawn=draw(report))
    for what, path in plain.items():
        assert cached[what].read_bytes() == path.read_bytes(), what


def test_reports_before_their_figures_read_whole_and_drawing_completes_them(context, tmp_path):
    """What the gate step writes has no figures (no Plots section, no broken image, no plots/);
    `draw_figures` adds them to each folder still holding that report, leaving the verdict's
    files as they were: the same bytes as reports written with their figures at once."""
    report, _ = context
    stamped, latest, other = tmp_path / "20260101T000000Z", tmp_path / "latest", tmp_path / "x"
    before = write_reports(report, stamped, latest)
    page, md = before["html"].read_text(), before["markdown"].read_text()
    assert "<figure" not in page and "<svg" not in page and "Plots" not in page
    assert "plots/" not in md and not (stamped / "plots").exists()
    verdict_bytes = {w: before[w].read_bytes() for w in ("json", "report")}

    assert draw_figures(stamped, latest, plot_cache=tmp_path / "cache") == len(report.figures)
    whole = write_reports(report, other, drawn=draw(report))
    for folder in (stamped, latest):
        for what, path in whole.items():
            assert (folder / path.name).read_bytes() == path.read_bytes(), (folder, what)
        assert sorted(p.name for p in (folder / "plots").iterdir()) == sorted(
            f"{f.name}.svg" for f in report.figures
        )
        manifest = json.loads((folder / "manifest.json").read_text())  # the folder's own
        assert manifest["gate.html"] == (folder / "gate.html").stat().st_size
    assert {w: before[w].read_bytes() for w in verdict_bytes} == verdict_bytes
    page = before["html"].read_text()
    assert page.count("<figure") == len(report.figures) and "Plots" in page

    # A later gate replaced `latest` meanwhile: the older report's figures leave it alone.
    again = tmp_path / "20260102T000000Z"
    write_reports(report, again)
    newer = report.model_copy(update={"figures": report.figures[:1]})
    write_reports(newer, latest)
    assert draw_figures(again, latest, plot_cache=tmp_path / "cache") == len(report.figures)
    assert (again / "plots").is_dir() and not (latest / "plots").exists()


def test_markdown_and_html_read_the_same_model(context):
    report, _ = context
    md, page = to_markdown(report), to_html(report)
    for text in ("Systems side by side", "Queries that lost most", "Recommendations", "Glossary"):
        assert text in md and text in page
    assert "![hotel/bm25: per-query nDCG@10 difference](plots/per_query-hotel-test-bm25.svg)" in md
    assert page.count("<figure") == len(report.figures) and page.count("<svg") >= len(
        report.figures
    )
    assert "Content-Security-Policy" in page
    assert not any(0x1F300 <= ord(ch) <= 0x1FAFF or 0x2600 <= ord(ch) <= 0x27BF for ch in md)


def test_worst_regressions_list_only_queries_that_got_worse(context):
    report, _ = context
    md = to_markdown(report)
    worst = md.split("### Worst per-query regressions", 1)[1].split("###", 1)[0]
    assert "| q1 |" in worst and "| q2 |" in worst
    assert "+0.0000" not in worst and "-0.0000" not in worst and "| q3 |" not in worst


def test_the_report_explains_the_measure_the_gate_judged(context):
    """One primary-measure rule: with `spike.measure: P@5` the gate judges P@5, and the report's
    explanations, per-query plot and one-line summary follow it (they followed nDCG@10)."""
    from rageval_pipeline.core.report import short_summary

    report, new = context
    old = report.verdict  # judged with the default policy: nDCG@10, as before
    assert [w.measure for w in old.worst_queries] == ["nDCG@10", "nDCG@10"]
    policy = GatePolicy.model_validate({"datasets": {"default": {"spike": {"measure": "P@5"}}}})
    baselines = {
        ("hotel", "bm25"): baseline_from_summary(
            run("bm25", [0.9, 0.8, 0.5, 0.5, 0.5, 0.5, 0.5, 0.2], 0.6, 0.8, BEFORE, "1")
        )
    }
    verdict = decide([new], baselines, policy)
    assert {w.measure for w in verdict.worst_queries} == {"P@5"}
    judged = build_report(verdict, [new], baselines)
    assert {c.measure for c in judged.runs[0].lost} == {"P@5"}
    assert [c.query_id for c in judged.runs[0].lost] == ["q2", "q4", "q6", "q8"]
    per_query = next(f for f in judged.figures if f.kind == "per_query")
    assert per_query.data["measure"] == "P@5"
    assert (
        short_summary(verdict, Path("r"))
        .splitlines()[1]
        .endswith(", P@5 0.4000 (-0.2000 vs baseline), against the stored baseline of 2026-01-01")
    )


def _seed_report(summary: RunSummary, policy: Path, queries=None, integrity=None):
    criteria = decide_validation(summary, load_policy(policy), integrity=integrity)
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    return validation_report(summary, queries or {}, criteria, timestamp=stamp, integrity=integrity)


def test_seed_003_report_fields_and_pass_fail_rule(context):
    _, summary = context
    queries = {"q1": {"text": "late checkout?", "query_type": "specific"}}
    report = _seed_report(summary, GATE_YAML, queries)
    assert report.total_queries == 8 == len(report.test_cases)
    q1 = report.test_cases[0]
    assert q1.query.text == "late checkout?" and q1.query.top_k == 10
    assert q1.relevance_labels == [0, 0, 3] and q1.rank_of_best == 3
    assert [r.judged for r in q1.actual_results] == [False, True, True]
    # Half the queries have P@5 = 1.0, half 0.4: 50% < 80%, so FAIL, and the issue says why.
    assert report.summary == (
        "FAIL: 4/8 queries (50%) achieved precision@5 >= 0.80. MRR 0.75 meets target 0.70."
    )
    assert report.issues[:2] == [
        "metadata completeness not measured for this run (no chunks): not judged",
        "hash validation not measured for this run (no chunks): not judged",
    ]
    assert "only 50% of queries reach precision@5 >= 0.80 (need 80%)" in report.issues
    assert report.metadata_completeness_rate is None
    passing = summary.model_copy(update={"per_query": {q: {"P@5": 1.0} for q in summary.per_query}})
    rates = {"metadata_completeness": 1.0, "hash_validation": 1.0}
    ok = _seed_report(passing, GATE_YAML, integrity=rates)
    assert ok.summary.startswith("PASS: 8/8 queries (100%)") and ok.mrr == 0.75
    assert ok.metadata_completeness_rate == 1.0
    assert all(issue.endswith("returned no relevant result") for issue in ok.issues)
    broken = _seed_report(passing, GATE_YAML, integrity=rates | {"hash_validation": 0.5})
    assert broken.summary.startswith("FAIL: 8/8")
    assert broken.issues[0] == "hash validation rate 50.00% < 100%"


def test_seed_003_verdict_follows_its_criterion_in_gate_yaml(context, tmp_path):
    """The validation report's PASS/FAIL is the gate's judgement of the policy's `validation`
    rules: changing seed 003's P@5 criterion in gate.yaml changes the report's verdict."""
    _, summary = context
    shipped = GATE_YAML.read_text(encoding="utf-8")
    assert shipped.count(SEED_P5) == 1
    assert _seed_report(summary, GATE_YAML).summary.startswith("FAIL: 4/8 queries (50%)")
    for criterion, expected in [
        ("min: 0.40, share: 0.80", "PASS: 8/8 queries (100%) achieved precision@5 >= 0.40."),
        ("min: 0.80, share: 0.50", "PASS: 4/8 queries (50%) achieved precision@5 >= 0.80."),
        ("min: 0.80, share: 0.50, blocking: false", "PASS: 4/8"),
    ]:
        policy = tmp_path / "gate.yaml"
        policy.write_text(
            shipped.replace(SEED_P5, SEED_P5.replace("min: 0.80, share: 0.80", criterion))
        )
        assert _seed_report(summary, policy).summary.startswith(expected)
    # The criterion's measure comes from the policy too: P@10 is not computed, so no query
    # reaches it.
    policy.write_text(shipped.replace(SEED_P5, SEED_P5.replace("P@5", "P@10")))
    assert _seed_report(summary, policy).summary.startswith(
        "FAIL: 0/8 queries (0%) achieved precision@10 >= 0.80."
    )


def test_short_summary_is_the_verdict_one_line_per_system_and_where(context, tmp_path):
    from rageval_pipeline.core.report import short_summary

    report, _ = context
    lines = short_summary(report.verdict, tmp_path).splitlines()
    # One blocking check: the primary measure decides, the others are watched.
    assert lines[0] == "Gate: FAIL: 1 blocking failure(s) in 1 of 2 run(s) (bm25): inconclusive"
    assert len(lines) == 4
    # bm25's drops are beyond tolerance but 8 queries cannot tell them from the band's: they
    # block, in the report's word.
    # Each line says what the run was compared with (the stored baseline, and its date).
    assert lines[1] == (
        "  hotel/test/bm25: FAIL (inconclusive), 1 blocking, nDCG@10 0.5125 (-0.0375 vs baseline)"
        ", against the stored baseline of 2026-01-01"
    )
    assert lines[2] == "  hotel/test/dense: PASS, nDCG@10 0.6000, thresholds only"
    assert lines[3] == f"Reports: {tmp_path}/gate.html (also gate.md, report.json, plots/)"
