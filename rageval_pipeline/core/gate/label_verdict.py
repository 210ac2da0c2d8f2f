"""The PPI gate on the synthetic population: systems compared on LLM-judged queries
corrected by the recorded random human sample.

The population is the companion (synthetic) query set; `sample.json` records the seeded draw
of it that humans judged (`statistics/sampling.py`). Each pooled system gets a run summary whose
`per_query` holds its values under the human grades on the drawn queries and whose
`llm_per_query` holds its values under the LLM labels on every query of the frame; the gate's
`statistics.rule: ppi` (core/gate/ppi_rule.py) then judges each system against a reference
system's summary. A judge below the policy's `calibration.min_kappa` is refused first: its
labels never reach the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from rageval_pipeline.core.gate.baselines import baseline_from_summary
from rageval_pipeline.core.gate.decide import decide
from rageval_pipeline.core.gate.models import RunSummary, Verdict
from rageval_pipeline.core.gate.policy import GatePolicy
from rageval_pipeline.core.generation.calibration import Calibration, Key, per_query_values
from rageval_pipeline.core.generation.config import GenerationError
from rageval_pipeline.core.measures.defaults import PRIMARY_MEASURE
from rageval_pipeline.core.statistics.sampling import HumanSample, check_sample
from rageval_pipeline.core.storage.reuse import content_key


def summaries(
    dataset: str,
    ranks: pd.DataFrame,
    human: Mapping[Key, int],
    llm: Mapping[Key, int],
    sample: HumanSample,
    *,
    where: str,
    created_at: str,
    measures: Sequence[object] = (PRIMARY_MEASURE,),
) -> dict[str, RunSummary]:
    """A run summary per pooled system on the sample's population (module docstring), with
    `measures` (those the gate compares: Measure objects or their names)."""
    measures = [str(m) for m in measures]
    drawn, frame = sample.drawn(), sorted(sample.frame)
    judged = {q for q, _ in human}
    check_sample(sample, judged & set(frame), set(frame), where=where, llm_where=where)
    humans = {m: per_query_values(ranks, human, drawn, m) for m in measures}
    llms = {m: per_query_values(ranks, llm, frame, m) for m in measures}
    out = {}
    for system in sorted(humans[measures[0]]):
        per_query = {q: {m: humans[m][system][q] for m in measures} for q in drawn}
        out[system] = RunSummary(
            dataset=dataset,
            split="test",
            system=system,
            fingerprint=content_key(system)[:16],
            run_id=content_key(dataset, system, sample.frame_digest())[:16],
            created_at=created_at,
            measures={m: sum(v[m] for v in per_query.values()) / len(drawn) for m in measures},
            per_query=per_query,  # the population is the sample's: its human values are the run's
            sample_per_query=per_query,
            n_queries=len(drawn),
            llm_per_query={q: {m: llms[m][system][q] for m in measures} for q in frame},
            human_sample=sample,
        )
    return out


def verdict(
    runs: Mapping[str, RunSummary],
    reference: str,
    policy: GatePolicy,
    calibration: Calibration,
) -> Verdict:
    """Every other system judged against `reference`'s summary under the dataset's rules,
    after the judge's calibration has passed the policy's floor."""
    if not calibration.usable:
        raise GenerationError(calibration.refusal or "LLM labels refused for gating")
    if reference not in runs:
        raise GenerationError(f"reference system {reference!r} is not among {sorted(runs)}")
    base = baseline_from_summary(runs[reference], note=f"reference system {reference}")
    others = [s for name, s in runs.items() if name != reference]
    baselines = {(s.dataset, s.system): base for s in others}
    return decide(others, baselines, policy)
