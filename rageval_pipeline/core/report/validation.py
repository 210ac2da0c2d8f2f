"""The validation report, `report_YYYYMMDD_HHMMSS.json`, one per judged run.

Its fields are the report format's (docs/gate.md). Its PASS/FAIL is the gate's: the policy's
`validation` rules (in data/gate.yaml: at least 80% of the queries reach precision@5 >= 0.80,
MRR >= 0.70, metadata completeness and hash validation 100%, p95 latency < 2000 ms) judged by
`core.gate.decide_validation`; this module only words the checks. Completeness and hash validity
are measured on the chunks (the `chunks` asset's checks); a run without chunks (run files,
services) reports them as null, says so in `issues`, and is judged on the other criteria.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, Field

from rageval_pipeline.core.gate import Check, RunSummary
from rageval_pipeline.core.gate.rules import Integrity, LatencyBelow, QueryShare, Rule, Threshold


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


def _spoken(measure: str) -> str:
    """A measure in the report's words: precision@5, MRR."""
    if measure.startswith("P@"):
        return "precision@" + measure.removeprefix("P@")
    return {"RR": "MRR"}.get(measure, measure)


def _said(rule: Rule, check: Check, total: int) -> tuple[str | None, str | None]:
    """(its sentence of the summary line, its issue) of one criterion, in the report's words."""
    if isinstance(rule, QueryShare):
        share = check.value or 0.0
        reach = f"{_spoken(str(rule.measure))} {rule.relation} {rule.min:.2f}"
        said = f"{round(share * total)}/{total} queries ({share:.0%}) achieved {reach}."
        issue = f"only {share:.0%} of queries reach {reach} (need {rule.share:.0%})"
        return said, None if check.passed else issue
    if isinstance(rule, Threshold):
        value, verb = check.value or 0.0, "meets" if check.passed else "is below"
        return f"{_spoken(str(rule.measure))} {value:.2f} {verb} target {rule.min:.2f}.", None
    if isinstance(rule, Integrity):
        name = rule.rate.replace("_", " ")
        if check.value is None:
            return None, f"{name} not measured for this run (no chunks): not judged"
        return None, None if check.passed else f"{name} rate {check.value:.2%} < {rule.min:.0%}"
    if isinstance(rule, LatencyBelow) and not check.passed:
        return None, f"{rule.stat} latency {check.value} ms is not below {rule.ms:g} ms"
    return None, None if check.passed else check.message


def _summary(report: ValidationReport, criteria: list[tuple[Rule, Check]]) -> tuple[str, list[str]]:
    """PASS when every blocking criterion's check passed; the sentences and issues say why."""
    said = [_said(rule, check, report.total_queries) for rule, check in criteria]
    passed = all(c.passed for _, c in criteria if c.blocking)
    issues = [issue for _, issue in said if issue is not None]
    for case in report.test_cases:
        if case.rank_of_best is None:
            issues.append(f"query {case.query_id} returned no relevant result")
    text = " ".join(sentence for sentence, _ in said if sentence is not None)
    return ("PASS: " if passed else "FAIL: ") + text, issues


def validation_report(
    summary: RunSummary,
    queries: dict[str, dict],
    criteria: list[tuple[Rule, Check]],
    *,
    timestamp: datetime,
    integrity: Mapping[str, float] | None = None,
) -> ValidationReport:
    """The validation report of one run; `queries` maps query_id to its `text` and `query_type`,
    `criteria` are the gate's checks of the run against the policy's `validation` rules
    (`core.gate.decide_validation`), `integrity` the rates of the run's chunks when measured."""
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
        metadata_completeness_rate=(integrity or {}).get("metadata_completeness"),
        hash_validation_pass_rate=(integrity or {}).get("hash_validation"),
        test_cases=cases,
        summary="",
        issues=[],
    )
    report.summary, report.issues = _summary(report, criteria)
    return report
