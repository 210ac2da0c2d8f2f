"""Seed 003's validation report, `report_YYYYMMDD_HHMMSS.json`, one per judged run.

Fields and the PASS/FAIL rule are the seed's: PASS when at least 80% of the queries reach
precision@5 >= 0.80, MRR >= 0.70, metadata completeness and hash validation are 100% and p95
latency < 2000 ms. Completeness and hash validity are measured on the chunks (the `chunks`
asset's checks); a run without chunks (run files, services) reports them as null, says so in
`issues`, and is judged on the other criteria.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from rageval_pipeline.core.gate import RunSummary


class SeedQuery(BaseModel):
    text: str
    top_k: int
    query_type: str | None = None


class SeedResult(BaseModel):
    """One listed result with what the warehouse keeps of it."""

    id: str
    rank: int
    relevance_label: int  # the judged grade; 0 when unjudged
    judged: bool


class TestCase(BaseModel):
    __test__ = False  # not a pytest class
    query_id: str
    query: SeedQuery
    expected_criteria: dict = Field(default_factory=dict)
    actual_results: list[SeedResult]
    relevance_labels: list[int]
    precision_at_k: float | None
    rank_of_best: int | None  # 1-indexed rank of the first relevant result


class ValidationReport(BaseModel):
    timestamp: str
    dataset: str
    system: str
    total_queries: int
    avg_precision_at_5: float | None
    mrr: float | None
    avg_latency_ms: float | None
    p95_latency_ms: float | None
    p99_latency_ms: float | None
    metadata_completeness_rate: float | None
    hash_validation_pass_rate: float | None
    test_cases: list[TestCase]
    summary: str
    issues: list[str]


def _summary(report: ValidationReport) -> tuple[str, list[str]]:
    issues, met = [], []
    good = [c for c in report.test_cases if (c.precision_at_k or 0.0) >= 0.80]
    share = len(good) / report.total_queries if report.total_queries else 0.0
    met.append(share >= 0.80)
    text = f"{len(good)}/{report.total_queries} queries ({share:.0%}) achieved precision@5 >= 0.80."
    mrr = report.mrr or 0.0
    met.append(mrr >= 0.70)
    text += f" MRR {mrr:.2f} {'meets' if mrr >= 0.70 else 'is below'} target 0.70."
    for name, rate in (
        ("metadata completeness", report.metadata_completeness_rate),
        ("hash validation", report.hash_validation_pass_rate),
    ):
        if rate is None:
            issues.append(f"{name} not measured for this run (no chunks): not judged")
        else:
            met.append(rate == 1.0)
            if rate < 1.0:
                issues.append(f"{name} rate {rate:.2%} < 100%")
    p95 = report.p95_latency_ms
    met.append(p95 is not None and p95 < 2000.0)
    if p95 is None or p95 >= 2000.0:
        issues.append(f"p95 latency {p95} ms is not below 2000 ms")
    if share < 0.80:
        issues.append(f"only {share:.0%} of queries reach precision@5 >= 0.80 (need 80%)")
    for case in report.test_cases:
        if case.rank_of_best is None:
            issues.append(f"query {case.query_id} returned no relevant result")
    return ("PASS: " if all(met) else "FAIL: ") + text, issues


def validation_report(
    summary: RunSummary,
    queries: dict[str, dict],
    *,
    timestamp: datetime,
    integrity: tuple[float, float] | None = None,
) -> ValidationReport:
    """Seed 003's report of one run; `queries` maps query_id to its `text` and `query_type`,
    `integrity` is (metadata completeness, hash validity) of the run's chunks when known."""
    cases = []
    for query_id in sorted(summary.per_query):
        listed = summary.top.get(query_id, [])
        results = [
            SeedResult(
                id=d.id, rank=i + 1, relevance_label=d.grade or 0, judged=d.grade is not None
            )
            for i, d in enumerate(listed)
        ]
        best = next((r.rank for r in results if r.relevance_label > 0), None)
        about = queries.get(query_id, {})
        cases.append(
            TestCase(
                query_id=query_id,
                query=SeedQuery(
                    text=about.get("text") or "",
                    top_k=summary.k or len(listed),
                    query_type=about.get("query_type"),
                ),
                actual_results=results,
                relevance_labels=[r.relevance_label for r in results],
                precision_at_k=summary.per_query[query_id].get("P@5"),
                rank_of_best=best,
            )
        )
    overall = summary.latency.get("all", {})
    report = ValidationReport(
        timestamp=timestamp.isoformat(),
        dataset=summary.dataset,
        system=summary.system,
        total_queries=len(cases),
        avg_precision_at_5=summary.measures.get("P@5"),
        mrr=summary.measures.get("RR"),
        avg_latency_ms=overall.get("mean"),
        p95_latency_ms=overall.get("p95"),
        p99_latency_ms=overall.get("p99"),
        metadata_completeness_rate=integrity[0] if integrity else None,
        hash_validation_pass_rate=integrity[1] if integrity else None,
        test_cases=cases,
        summary="",
        issues=[],
    )
    report.summary, report.issues = _summary(report)
    return report
