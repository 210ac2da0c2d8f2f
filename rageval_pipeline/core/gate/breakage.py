"""The breakage guard: queries whose answer left the top k, named, and blocking in number.

Real paired differences are skewed (many queries gain a little, a few lose a lot): a change that
breaks 4 of 50 queries while the rest gain a little moves the mean by less than the band, and
the interval rule, which sees only the mean, passes it. A query *broke* when its primary measure
fell from at least `high` in the baseline to at most `low` in the run (nDCG@10 0.5 is the one
relevant document at rank 3; 0.1 is it gone from the top 10 or at its bottom). Each broken query
is named; a query that was fixed (from at most `low` to at least `high`) offsets one, so a
swap of systems that trades answers is left to the mean. The run is blocked, under
`semantic_degraded_spike`, when the broken queries net of the fixed ones reach
max(`count`, `share` of the queries answered in the baseline). Defaults and their error rates:
docs/gate.md, "The breakage guard".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rageval_pipeline.core.gate.coverage import NAMED
from rageval_pipeline.core.gate.evaluation import EPS, Evaluation, per_query_pairs
from rageval_pipeline.core.gate.models import Baseline, Check
from rageval_pipeline.core.gate.policy import Breakage
from rageval_pipeline.core.measures.names import Measure


@dataclass(frozen=True)
class Broken:
    """The queries that broke and were fixed, among `n` paired ones."""

    broken: list[tuple[str, float, float]]  # (query id, baseline value, run value), worst first
    fixed: list[str]
    n: int
    answered: int  # paired queries at `high` or more in the baseline: the ones that can break
    limit: int

    @property
    def net(self) -> int:
        return len(self.broken) - len(self.fixed)

    @property
    def blocks(self) -> bool:
        return self.net >= self.limit


def broken_queries(pairs: Sequence[tuple[str, float, float]], guard: Breakage) -> Broken:
    """The guard on (query id, baseline value, run value) of a higher-is-better measure."""
    broken = [
        (qid, ref, val)
        for qid, ref, val in pairs
        if ref >= guard.high - EPS and val <= guard.low + EPS
    ]
    broken.sort(key=lambda b: (b[2] - b[1], b[0]))
    fixed = [qid for qid, ref, val in pairs if ref <= guard.low + EPS and val >= guard.high - EPS]
    answered = sum(ref >= guard.high - EPS for _, ref, _ in pairs)
    return Broken(broken, fixed, len(pairs), answered, guard.limit(answered))


def breakage_check(run: Evaluation, baseline: Baseline, measure: Measure) -> Check | None:
    """The guard on the run's primary measure (None for a lower-is-better one, or without
    per-query values in both)."""
    guard = run.rules.breakage
    pairs = per_query_pairs(run, baseline, measure)
    if not measure.higher_is_better or len(pairs) < 2:
        return None
    found = broken_queries(pairs, guard)
    named = ", ".join(f"{q} {ref:.4f} -> {val:.4f}" for q, ref, val in found.broken[:NAMED])
    more = len(found.broken) - NAMED
    named += f" and {more} more" if more > 0 else ""
    fixed = f", {len(found.fixed)} fixed" if found.fixed else ""
    lost = f"left the top {measure.k}" if measure.k else "was lost"
    text = (
        f"{run.label} {measure}: {len(found.broken)} of {found.n} queries broke (from "
        f">= {guard.high:g} to <= {guard.low:g}: their answer {lost}; {found.answered} had one)"
        + (f": {named}" if named else "")
        + f"{fixed}; {found.limit} or more, net of fixed ones, block"
    )
    blocked = found.blocks
    return run.check(
        kind="breakage",
        measure=str(measure),
        value=float(found.net),
        reference=float(found.limit),
        ci_low=None,
        ci_high=None,
        passed=not blocked,
        blocking=guard.blocking,
        category="semantic_degraded_spike" if blocked else None,
        message=text,
    )
