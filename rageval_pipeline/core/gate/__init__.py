"""Release gate: run summaries, baselines, the gate policy, the verdict and its regression taxonomy.

The Dagster layer reads run summaries from the warehouse and baselines from `data/baselines/`,
calls `decide`, and fails its asset check when the verdict has not passed. Everything here is pure
and deterministic: the same summaries, baselines and policy always give the same verdict.
Semantics are documented in docs/gate.md.
"""

from rageval_pipeline.core.gate.baselines import (
    baseline_from_summary,
    baseline_path,
    load_baseline,
    load_baselines,
    load_placed,
    write_baseline,
)
from rageval_pipeline.core.gate.decide import decide, decide_validation
from rageval_pipeline.core.gate.models import (
    BASELINE_VERSION,
    LATENCY_STATS,
    MEASURE_KINDS,
    OVERALL,
    Baseline,
    Check,
    CheckKind,
    ConfigChange,
    LatencyStat,
    QueryRegression,
    Rerun,
    RunChange,
    RunSummary,
    Verdict,
)
from rageval_pipeline.core.gate.policy import (
    DEFAULT_RULES_KEY,
    Band,
    GatePolicy,
    GateRules,
    LatencyTolerance,
    Spike,
    Statistics,
    Tolerance,
    UnjudgedSpike,
    load_policy,
    policy_or_defaults,
)
from rageval_pipeline.core.gate.rules import INTEGRITY_RATES, Rule
from rageval_pipeline.core.gate.taxonomy import CATEGORIES, FAMILY_CATEGORY, Category, category_of

__all__ = [
    "BASELINE_VERSION",
    "CATEGORIES",
    "DEFAULT_RULES_KEY",
    "FAMILY_CATEGORY",
    "INTEGRITY_RATES",
    "LATENCY_STATS",
    "MEASURE_KINDS",
    "OVERALL",
    "Band",
    "Baseline",
    "Category",
    "Check",
    "CheckKind",
    "ConfigChange",
    "GatePolicy",
    "GateRules",
    "LatencyStat",
    "LatencyTolerance",
    "QueryRegression",
    "Rerun",
    "Rule",
    "RunChange",
    "RunSummary",
    "Spike",
    "Statistics",
    "Tolerance",
    "UnjudgedSpike",
    "Verdict",
    "baseline_from_summary",
    "baseline_path",
    "category_of",
    "decide",
    "decide_validation",
    "load_baseline",
    "load_baselines",
    "load_placed",
    "load_policy",
    "policy_or_defaults",
    "write_baseline",
]
