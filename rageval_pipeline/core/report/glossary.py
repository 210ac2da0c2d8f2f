"""The report's glossary: every measure it names, its statistics and the regression categories.

Measures are explained by the measure registry (`core.measures.names`): each family's docstring,
its direction and category, and the descriptions of the parameters a name sets, so a new
measure family or parameter is explained without touching this module. The categories' and
the statistics' meanings are the gate's (docs/gate.md), written once here.
"""

from __future__ import annotations

import re
from typing import get_args

from pydantic import BaseModel

from rageval_pipeline.core.gate import FAMILY_CATEGORY, LATENCY_STATS, Category, category_of
from rageval_pipeline.core.measures.names import FAMILIES, Measure, sort_key, try_parse

CATEGORY_MEANINGS: dict[Category, str] = {
    "recall_drop": "relevant targets no longer reach the list",
    "ranking_shift": "the right targets are still found but ranked lower, or false positives "
    "rose above them",
    "diversity_collapse": "the list is filled from fewer source documents",
    "latency_regression": "queries take longer than the limit or than the reference timed "
    "beside them",
    "semantic_degraded_spike": "the mean may hold, but more queries than allowed lost much of "
    "their primary measure",
    "unjudged_spike": "more of the top 10 is unjudged than in the baseline: the drops may be "
    "missing judgments, not worse retrieval",
    "unjudged_run": "the run lost most of the baseline's judged documents from its top 10: "
    "its ids likely do not match the corpus (another corpus, a new chunking without derived "
    "judgments); map the ids or judge the new documents with `rageval pool`",
}

# The report's own columns and labels (render.py and summary.py print these terms).
TERMS: dict[str, str] = {
    "CI": "confidence interval, at the level its column names: 95% for the bootstrap interval "
    "of a mean over queries, 1 - the policy's alpha for the paired per-query differences "
    "beside a Delta",
    "Delta": "current minus baseline (or minus the reference run), averaged over the queries "
    "both measured",
    "p (Holm)": "p-value of the paired randomization test, Holm-corrected across the measures "
    "compared for the run; below alpha (0.05) the change is unlikely to be noise",
    "MDE": "minimum detectable effect: the smallest change this many queries can tell from "
    "noise (80% power), from the SD of the paired per-query differences",
    "Band": "the tolerated drop against the baseline (policy `tolerance`)",
    "Detectable drop": "band + MDE: the drop the gate fails 4 times in 5 on this suite",
    "To resolve the band": "queries with which no change passes 9 times in 10 and a drop of "
    "twice the band fails as often; with PPI, fewer human-judged ones among 10x LLM-judged",
    "PASS / FAIL": "FAIL: a blocking check failed; the release is held",
    "WARN": "a non-blocking check failed: reported, does not hold the release",
    "INCONCLUSIVE": "the statistics cannot tell the change from a drop of the band: it "
    "blocks, or under statistics.inconclusive: block_likely only when the drop is likely "
    "(beyond the band, its interval excluding 0)",
    "IMPROVED": "better beyond tolerance, and the statistics establish it",
    "p50 / p95 / p99": "latency percentiles in milliseconds over the timed queries",
}

_SENTENCE = re.compile(r"(?<=[.)])\s+(?=[A-Z])")


class Entry(BaseModel):
    term: str
    meaning: str


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.replace("`", "").split())
    return _SENTENCE.split(text, maxsplit=1)[0]


def _measure_meaning(measure: Measure) -> str:
    cls = type(measure)
    parts = [_first_sentence(cls.__doc__ or cls.NAME)]
    if measure.k is not None:
        parts.append(f"@{measure.k}: {Measure.model_fields['k'].description} {measure.k}.")
    if measure.budget is not None:
        described = Measure.model_fields["budget"].description
        parts.append(f"@{measure.budget}t: {described}, {measure.budget} whitespace tokens.")
    for param, value in measure.params().items():
        described = Measure.model_fields[param].description
        parts.append(f"{param}={value}: {described}." if value is not True else f"{described}.")
    direction = "higher" if measure.higher_is_better else "lower"
    category = f"; worse is {category_of(measure)}" if category_of(measure) else ""
    parts.append(f"({cls.FAMILY} family, {direction} is better{category}.)")
    return " ".join(parts)


def _category_meaning(category: Category) -> str:
    measures = sorted(n for n, cls in FAMILIES.items() if category == FAMILY_CATEGORY[cls.FAMILY])
    of = f" Measures: {', '.join(measures)}." if measures else ""
    return CATEGORY_MEANINGS[category] + "." + of


def glossary(names: set[str], terms: set[str] | None = None) -> list[Entry]:
    """Entries for the measure `names` a report shows (latency statistics and unknown names
    skipped), the report's `terms` (default all) and every regression category."""
    entries = [
        Entry(term=name, meaning=_measure_meaning(measure))
        for name in sorted(names, key=sort_key)
        if name not in LATENCY_STATS and (measure := try_parse(name)) is not None
    ]
    entries += [Entry(term=t, meaning=m) for t, m in TERMS.items() if terms is None or t in terms]
    entries += [Entry(term=c, meaning=_category_meaning(c)) for c in get_args(Category)]
    return entries
