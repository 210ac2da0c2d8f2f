"""Which measures of a run the gate may compare with its baseline, and why.

Per-chunk ranking measures (nDCG@10, RR, AP, P@k, R@k, Judged@k, and the span measures at a
rank cutoff) count retrieved units. When the chunking changed since the baseline, or the run is
scored at another level (document against chunk), they count other units: a top 10 of
512-token windows holds eight times the text of a top 10 of sections, so nDCG@10 rises with
the chunk size whatever the retriever does (techdocs, bm25, reference sections to fixed
512/128: nDCG@10 +35.9% for 4,108 tokens in the top 10 instead of 508). Then they are reported,
never compared, improved or failed, and the verdict is decided on the evidence measures at
equal token budgets (`EvidenceRecall@512t`, `TokenPrecision@512t` at the policy's `budgets`),
with the token cost (`Tokens@k`) watched. When the baseline has no budget measure, a level
change stays refused (the `level` check) and a chunking change is judged on absolute limits
alone until the baseline is re-recorded. An unchanged chunking at one level keeps every
comparison, and so does a run scored by document under a new chunking: each document ranks by
its best chunk, whatever the chunks.

A system that returns its own passages (text or offsets, `core/suites/passages.py`) is judged
by derived grades of the passages it retrieved, which are all the relevant units known of its
chunking: the measures whose ideal list needs every relevant unit (R@k, nDCG@k, AP, Rprec,
F1@k: IDEAL_NAMES) read R@100 = 1.0000 for any such run, a broken one included. They are marked
not comparable, left out of the verdict (and of the report's systems side by side), and the
verdict is decided on the budget measures, as for a chunking change.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rageval_pipeline.core.gate.changes import chunking_changes, level_changed
from rageval_pipeline.core.gate.evaluation import Evaluation
from rageval_pipeline.core.gate.models import Baseline, _SummaryFields
from rageval_pipeline.core.gate.rules import Rule
from rageval_pipeline.core.measures.defaults import BUDGET_FAMILIES, budget_measures
from rageval_pipeline.core.measures.names import Measure, parse_measure, try_parse
from rageval_pipeline.core.suites.passages import is_passage_id

# Measures whose ideal list (or relevant count) needs every relevant unit of the chunking.
IDEAL_NAMES = frozenset({"R", "nDCG", "AP", "Rprec", "F1"})
OWN_PASSAGES = "it returns its own passages"


def own_passages(summary: _SummaryFields | None) -> bool:
    """Whether a run (or baseline) ranked passages of its own chunker: every listed id a
    passage id `doc:span:start-end`."""
    if summary is None:
        return False
    ids = pd.Series([item.id for items in summary.top.values() for item in items], dtype=object)
    return bool(len(ids)) and bool(is_passage_id(ids).all())


def ideal_bound(measure: Measure | None) -> bool:
    """A measure whose ideal list the retrieved passages alone would make (IDEAL_NAMES)."""
    return measure is not None and measure.budget is None and measure.NAME in IDEAL_NAMES


@dataclass(frozen=True)
class Comparability:
    """What changed in the units a run retrieves, and the budget measures it is judged on then."""

    changed: str | None  # the change in words ("the chunking changed (...)"); None: none
    budget: tuple[Measure, ...] = ()  # at the policy's budgets, in both run and baseline
    budgets: tuple[int, ...] = ()  # the policy's
    level: bool = False  # the scoring level changed (document against chunk)
    own: bool = False  # run or baseline returns its own passages (IDEAL_NAMES not comparable)

    @property
    def refuses(self) -> bool:
        """A level change with nothing to judge it on: the gate refuses to compare."""
        return self.level and not self.budget

    def compares(self, measure: Measure) -> bool:
        """Whether `measure` may be compared with the baseline: every measure when the units
        did not change; else only measures at a token budget, and the token cost (Tokens@k)."""
        if self.own:
            return not ideal_bound(measure)
        return self.changed is None or measure.budget is not None or measure.family == "budget"

    def compared(self, measures: list[Measure]) -> list[Measure]:
        """The measures the verdict is decided on, from the ones it would compare otherwise:
        the budget measures when the units changed (or are the system's own passages, whose
        other comparable measures then decide when there is no budget measure)."""
        if self.changed is None:
            return measures
        if self.own and not self.budget:
            return [m for m in measures if self.compares(m)]
        return list(self.budget)

    def watched(self, measures: list[Measure]) -> list[Measure]:
        """The measures watched beside the decided ones (the other budgets among them: the
        primary measure alone decides by default)."""
        return [m for m in measures if self.compares(m)]

    def limits(self, rules: list[Rule]) -> list[Rule]:
        """The absolute rules (thresholds, targets) that still apply: a floor on a per-chunk
        ranking measure was set for the units it counted, so once the verdict is decided on
        budget measures it is reported, not applied (P@5 >= 0.70 means another thing over
        512-token windows). Without budget measures the limits are all the gate has."""
        if self.changed is None or (not self.budget and not self.own):
            return rules
        return [
            r
            for r in rules
            if (m := try_parse(getattr(r, "measure", ""))) is None or self.compares(m)
        ]

    def primary(self, chosen: Measure | None) -> Measure | None:
        """The policy's spike measure, unless it is no longer comparable."""
        return chosen if chosen is not None and self.compares(chosen) else None

    def not_compared(self, name: str, baseline: Baseline | None) -> str:
        """Why a measure of the run was not compared ("" when it was, or nothing changed)."""
        measure = try_parse(name)
        if self.changed is None or measure is None or self.compares(measure):
            return ""
        before = None if baseline is None else baseline.measures.get(name)
        was = "" if before is None else f"baseline {before:.4f}; "
        if self.own:
            return (
                f" ({was}not comparable: {OWN_PASSAGES}, and its ideal list holds only the "
                "passages it retrieved)"
            )
        return f" ({was}not compared: {self.changed} since the baseline, it counts other units)"

    def note(self, label: str) -> str | None:
        """The first screen's words: what the verdict of `label` was decided on, and why."""
        if self.changed is None:
            return None
        families = " and ".join(BUDGET_FAMILIES)
        at = ", ".join(str(b) for b in self.budgets)
        if self.own:
            decided = (
                f"the verdict is decided on {families} at equal token budgets ({at} tokens)"
                if self.budget
                else f"there is no {families} at {at} tokens in both run and baseline, so the "
                "verdict is decided on its other measures (P, RR, Success)"
            )
            return (
                f"{label}: {OWN_PASSAGES} (text or offsets), judged by the passages it "
                "retrieved: R@k, nDCG@k, AP, Rprec and F1@k would rank it against an ideal list "
                f"of those alone (R@100 is 1.0000 for any such run), so they are not comparable "
                f"and left out of the verdict and the side-by-side table; {decided}."
            )
        if not self.budget:
            return (
                f"{label}: {self.changed} since the baseline, so its per-chunk ranking measures "
                f"(nDCG, RR, AP, P, R) count other units and are not compared; the baseline has "
                f"no {families} at {at} tokens to compare instead: only absolute limits apply "
                "until the baseline is re-recorded."
            )
        return (
            f"{label}: {self.changed} since the baseline, so per-chunk ranking measures (nDCG, "
            f"RR, AP, P, R) count other units: they are reported, not compared. The verdict is "
            f"decided on {families} at equal token budgets ({at} tokens); the token cost is "
            "watched."
        )


def comparability(run: Evaluation, baseline: Baseline | None) -> Comparability:
    """The rule of the module for `run` against `baseline` (None: nothing to compare)."""
    budgets = tuple(run.rules.budgets)
    s = run.summary
    if baseline is None:
        own = own_passages(s)
        return Comparability(OWN_PASSAGES if own else None, budgets=budgets, own=own)
    if own_passages(s) or own_passages(baseline):
        both = set(s.measures) & set(baseline.measures)
        budget = tuple(parse_measure(m) for m in budget_measures(budgets) if m in both)
        return Comparability(OWN_PASSAGES, budget, budgets, own=True)
    level = level_changed(s, baseline)
    if level:
        changed = f"the scoring level changed ({baseline.level} -> {s.level})"
    elif s.level == "chunk" and (keys := chunking_changes(baseline.config, s.config)):
        changed = f"the chunking changed ({', '.join(keys)})"
    else:
        return Comparability(None, budgets=budgets)
    both = set(s.measures) & set(baseline.measures)
    budget = tuple(parse_measure(m) for m in budget_measures(budgets) if m in both)
    return Comparability(changed, budget, budgets, level)
