"""Why a run moved: the queries that lost and gained most (with the documents that entered and
left their top 10, grades and rank moves, beside the baseline's list) and recommendations by
rule (seed 001 section 6)."""

from __future__ import annotations

from pydantic import BaseModel

from rageval_pipeline.core.gate import Baseline, RunSummary, Verdict
from rageval_pipeline.core.gate.changes import flatten
from rageval_pipeline.core.gate.models import Listed

EPS = 1e-9  # a per-query change smaller than this is no change
SHOWN = 5  # queries listed as lost / gained most


class Move(BaseModel):
    id: str
    grade: int | None
    before: int  # rank in the baseline's list
    after: int  # rank in the current list


class QueryChange(BaseModel):
    query_id: str
    measure: str
    baseline: float
    value: float
    delta: float
    current: list[Listed]
    previous: list[Listed]
    entered: list[Listed]  # in the current top 10, not in the baseline's
    left: list[Listed]  # in the baseline's top 10, not in the current
    moves: list[Move]  # in both, at another rank


def primary_measure(summary: RunSummary, baseline: Baseline | None) -> str | None:
    """The measure per-query explanations follow: nDCG@10 when both have it, else the first
    shared one."""
    shared = sorted(set(summary.measures) & set(baseline.measures if baseline else {}))
    if "nDCG@10" in shared:
        return "nDCG@10"
    return shared[0] if shared else None


def query_deltas(summary: RunSummary, baseline: Baseline, measure: str) -> dict[str, float]:
    """query -> current - baseline of `measure`, over queries both measured."""
    return {
        q: values[measure] - baseline.per_query[q][measure]
        for q, values in sorted(summary.per_query.items())
        if measure in values and measure in baseline.per_query.get(q, {})
    }


def _change(q: str, measure: str, summary: RunSummary, baseline: Baseline) -> QueryChange:
    current, previous = summary.top.get(q, []), baseline.top.get(q, [])
    now = {d.id: i + 1 for i, d in enumerate(current)}
    before = {d.id: i + 1 for i, d in enumerate(previous)}
    moves = [
        Move(id=d.id, grade=d.grade, before=before[d.id], after=now[d.id])
        for d in current
        if d.id in before and before[d.id] != now[d.id]
    ]
    value, base = summary.per_query[q][measure], baseline.per_query[q][measure]
    return QueryChange(
        query_id=q,
        measure=measure,
        baseline=base,
        value=value,
        delta=value - base,
        current=current,
        previous=previous,
        entered=[d for d in current if d.id not in before],
        left=[d for d in previous if d.id not in now],
        moves=moves,
    )


def changed_queries(
    summary: RunSummary, baseline: Baseline | None
) -> tuple[list[QueryChange], list[QueryChange]]:
    """(lost most, gained most): only queries that actually got worse / better, worst (best)
    first, ties by query id."""
    measure = primary_measure(summary, baseline)
    if baseline is None or measure is None:
        return [], []
    deltas = query_deltas(summary, baseline, measure)
    lost = sorted((d, q) for q, d in deltas.items() if d < -EPS)[:SHOWN]
    gained = sorted(((-d, q) for q, d in deltas.items() if d > EPS))[:SHOWN]
    return (
        [_change(q, measure, summary, baseline) for _, q in lost],
        [_change(q, measure, summary, baseline) for _, q in gained],
    )


def _delta(summary: RunSummary, baseline: Baseline, prefix: str) -> float | None:
    """The change of the first measure named `prefix...` both have (e.g. "P@" -> P@5)."""
    names = sorted(m for m in summary.measures if m.startswith(prefix) and m in baseline.measures)
    return summary.measures[names[0]] - baseline.measures[names[0]] if names else None


def recommendations(summary: RunSummary, baseline: Baseline | None, verdict: Verdict) -> list[str]:
    """Seed 001 section 6: what to look at next, by rule."""
    key = (summary.dataset, summary.split, summary.system)
    checks = [c for c in verdict.checks if (c.dataset, c.split, c.system) == key]
    config = flatten(summary.config or {})
    threshold = next((v for k, v in config.items() if k.endswith("threshold")), None)
    out = []
    judged = summary.measures.get("Judged@10")
    if judged is not None and judged < 0.8:
        out.append(
            f"Judged@10 is {judged:.2f}: many of the top 10 are unjudged, so the measures "
            "undercount; judge the pool (the top 10 of every system) before trusting a drop."
        )
    if baseline is None:
        out.append(
            "No baseline: review this run and record it with `rageval baseline update "
            f"--dataset {summary.dataset} --system {summary.system}`."
        )
        return out
    precision, recall = _delta(summary, baseline, "P@"), _delta(summary, baseline, "R@")
    if precision is not None and recall is not None and precision < -0.01 and recall >= -0.01:
        now = f"currently {threshold}" if threshold is not None else "none set"
        out.append(
            f"Precision fell ({precision:+.4f}) while recall held ({recall:+.4f}): the right "
            f"documents are still retrieved but ranked among false positives. Adjust the "
            f"reranker threshold ({now}) or review the false positives in the top 5."
        )
    if recall is not None and recall < -0.01:
        out.append(
            f"Recall fell ({recall:+.4f}): relevant documents no longer reach the list. Look at "
            "chunking (size, overlap) and the first stage's depth; a reranker only reorders "
            "what it receives."
        )
    if any(c.category == "latency_regression" for c in checks if not c.passed):
        out.append(
            "Latency rose beyond tolerance: lower the rerank depth or the batch size, or "
            "profile the slowest intent in the latency plot."
        )
    if any(c.kind == "fingerprint" and not c.passed for c in checks):
        out.append(
            "The configuration differs from the baseline's: if the change is intended and the "
            "measures hold, record it with `rageval baseline update`."
        )
    if not out:
        out.append("No measure moved beyond tolerance: no action needed.")
    return out
