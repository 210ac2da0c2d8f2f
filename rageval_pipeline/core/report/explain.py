"""Why a run moved: the queries that lost and gained most (their text, the targets that entered
and left their top 10 with grades, snippets of the relevant ones, rank moves) and
recommendations by rule that name only parameters the system has."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from rageval_pipeline.core.gate import Baseline, RunSummary, Verdict
from rageval_pipeline.core.gate.changes import flatten
from rageval_pipeline.core.gate.models import Listed
from rageval_pipeline.core.measures.defaults import primary_measure
from rageval_pipeline.core.measures.names import sort_key
from rageval_pipeline.core.report.texts import ReportTexts

# Checks about the comparison itself, not a measure that moved: said in the verdict, the
# configuration diff and the next steps instead.
CONTEXT_KINDS = frozenset({"configuration", "suite", "missing_baseline", "value", "policy"})

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
    text: str | None = None  # the query's text, when the report was given it
    # Snippets of the relevant targets (grade > 0) that entered or left, when known.
    snippets: dict[str, str] = Field(default_factory=dict)

    @property
    def relevant_entered(self) -> list[Listed]:
        return [d for d in self.entered if (d.grade or 0) > 0]

    @property
    def relevant_left(self) -> list[Listed]:
        return [d for d in self.left if (d.grade or 0) > 0]


def explained_measure(
    verdict: Verdict, summary: RunSummary, baseline: Baseline | None
) -> str | None:
    """The measure per-query explanations follow: the one the gate judged the run by, else
    (the gate compared none) the primary measure among those run and baseline share."""
    key = (summary.dataset, summary.split, summary.system)
    shared = set(summary.measures) & set(baseline.measures if baseline else {})
    return verdict.judged_by(key) or primary_measure(sorted(shared, key=sort_key))


def query_deltas(summary: RunSummary, baseline: Baseline, measure: str) -> dict[str, float]:
    """query -> current - baseline of `measure`, over queries both measured."""
    return {
        q: values[measure] - baseline.per_query[q][measure]
        for q, values in sorted(summary.per_query.items())
        if measure in values and measure in baseline.per_query.get(q, {})
    }


def _change(
    q: str, measure: str, summary: RunSummary, baseline: Baseline, texts: ReportTexts
) -> QueryChange:
    current, previous = summary.top.get(q, []), baseline.top.get(q, [])
    now = {d.id: i + 1 for i, d in enumerate(current)}
    before = {d.id: i + 1 for i, d in enumerate(previous)}
    moves = [
        Move(id=d.id, grade=d.grade, before=before[d.id], after=now[d.id])
        for d in current
        if d.id in before and before[d.id] != now[d.id]
    ]
    value, base = summary.per_query[q][measure], baseline.per_query[q][measure]
    change = QueryChange(
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
        text=texts.query(summary.dataset, q),
    )
    for d in change.relevant_entered + change.relevant_left:
        if (snippet := texts.target(summary.dataset, d.id)) is not None:
            change.snippets[d.id] = snippet
    return change


def changed_queries(
    summary: RunSummary, baseline: Baseline | None, measure: str | None, texts: ReportTexts
) -> tuple[list[QueryChange], list[QueryChange]]:
    """(lost most, gained most) on `measure`: only queries that actually got worse / better,
    worst (best) first, ties by query id."""
    if baseline is None or measure is None:
        return [], []
    deltas = query_deltas(summary, baseline, measure)
    lost = sorted((d, q) for q, d in deltas.items() if d < -EPS)[:SHOWN]
    gained = sorted(((-d, q) for q, d in deltas.items() if d > EPS))[:SHOWN]
    return (
        [_change(q, measure, summary, baseline, texts) for _, q in lost],
        [_change(q, measure, summary, baseline, texts) for _, q in gained],
    )


def _delta(summary: RunSummary, baseline: Baseline, prefix: str) -> float | None:
    """The change of the first measure named `prefix...` both have (e.g. "P@" -> P@5)."""
    names = sorted(m for m in summary.measures if m.startswith(prefix) and m in baseline.measures)
    return summary.measures[names[0]] - baseline.measures[names[0]] if names else None


Symptom = Literal["ranking", "recall", "latency"]
# Per retriever, the parameters that move each symptom. Only those a run's configuration holds
# are named, so a plain BM25 run is never told to adjust a reranker it does not have.
KNOBS: dict[str, dict[Symptom, tuple[str, ...]]] = {
    "bm25": {
        "ranking": ("k1", "b"),
        "recall": ("chunking.strategy", "chunking.size", "chunking.overlap"),
        "latency": ("chunking.size",),
    },
    "dense": {
        "ranking": ("model",),
        "recall": ("chunking.strategy", "chunking.size", "chunking.overlap", "max_seq_length"),
        "latency": ("backend", "max_seq_length", "model"),
    },
    "rerank": {
        "ranking": ("threshold", "model"),
        "recall": ("depth",),
        "latency": ("depth", "batch_size", "model"),
    },
    "rrf": {"ranking": ("k",)},
}
MEMBERS = ("members", "candidates")  # where fused and reranking systems record the systems below


def knobs(config: dict | None, symptom: Symptom, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value of the parameters of `config` (and of the systems it combines) that
    move `symptom`; a fused system's member weights move its ranking."""
    config = config or {}
    flat = flatten(config)
    out = {
        prefix + k: flat[k]
        for k in KNOBS.get(str(config.get("retriever")), {}).get(symptom, ())
        if k in flat
    }
    for field in MEMBERS:
        below = config.get(field)
        if isinstance(below, dict) and "retriever" in below:  # one system: rerank candidates
            out |= knobs(below, symptom, f"{prefix}{field}.")
        elif isinstance(below, dict):
            for name, member in sorted(below.items()):
                if symptom == "ranking" and isinstance(member, dict) and "weight" in member:
                    out[f"{prefix}{field}.{name}.weight"] = member["weight"]
                if isinstance(member, dict):
                    out |= knobs(member, symptom, f"{prefix}{field}.{name}.")
    return out


def _named(found: dict[str, Any]) -> str:
    return ", ".join(f"{k} (now {'none' if v is None else v})" for k, v in found.items())


def recommendations(summary: RunSummary, baseline: Baseline | None, verdict: Verdict) -> list[str]:
    """What to look at next, by rule, naming only the parameters the run's
    configuration has."""
    key = (summary.dataset, summary.split, summary.system)
    checks = [c for c in verdict.checks if (c.dataset, c.split, c.system) == key]
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
        found = knobs(summary.config, "ranking")
        tune = f" Parameters that set the order: {_named(found)}." if found else ""
        out.append(
            f"Precision fell ({precision:+.4f}) while recall held ({recall:+.4f}): the right "
            "targets are still retrieved but ranked among false positives. Review the false "
            f"positives in the top 5 of the queries that lost most.{tune}"
        )
    if recall is not None and recall < -0.01:
        found = knobs(summary.config, "recall")
        tune = f" Parameters that decide what is found: {_named(found)}." if found else ""
        out.append(
            f"Recall fell ({recall:+.4f}): relevant targets no longer reach the list. Look at "
            f"the relevant targets that left the top 10 below.{tune}"
        )
    if any(c.category == "latency_regression" for c in checks if not c.passed):
        found = knobs(summary.config, "latency")
        tune = f" Parameters that set the time per query: {_named(found)}." if found else ""
        out.append(
            "Latency rose beyond tolerance: profile the slowest intent in the latency plot." + tune
        )
    moved = [c for c in checks if not c.passed and c.kind not in CONTEXT_KINDS]
    if not out and not moved:
        out.append("No measure moved beyond tolerance: no action needed.")
    return out
