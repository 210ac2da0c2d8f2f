"""The PPI gate refuses LLM labels whose judge is below the policy's calibration floor."""

from __future__ import annotations

import pytest

from rageval_pipeline.core.gate import GatePolicy, label_verdict
from rageval_pipeline.core.generation import calibration
from rageval_pipeline.core.generation.config import GenerationError
from rageval_pipeline.core.generation.judge_labels import Label


def _label(query: str, target: str, grade: int) -> Label:
    return Label(
        query_id=query,
        target_id=target,
        synthetic=False,
        grade=grade,
        raw=str(grade),
        judge="openai:m",
        prompt_hash="h",
        passage_sha256="p",
    )


def test_a_judge_below_the_floor_is_refused_for_gating_in_one_line():
    import pandas as pd

    human = {("q1", "a"): 3, ("q1", "b"): 0, ("q2", "a"): 0, ("q2", "b"): 2}
    labels = [
        _label("q1", "a", 0),
        _label("q1", "b", 3),
        _label("q2", "a", 2),
        _label("q2", "b", 0),
    ]
    ranks = pd.DataFrame(
        [(q, t, "bm25", r) for q in ("q1", "q2") for r, t in enumerate("ab", 1)],
        columns=["query_id", "target_id", "system", "rank"],
    )
    result = calibration.calibrate(labels, human, ranks, min_kappa=0.4)
    assert result.kappa_quadratic < 0.4 and not result.usable
    assert result.confusion[3][0] == 1 and result.confusion[0][3] == 1
    with pytest.raises(GenerationError) as refused:
        label_verdict.verdict({}, "bm25", GatePolicy(), result)
    assert str(refused.value) == (
        "LLM labels of openai:m refused for gating: their weighted kappa with human grades is "
        f"{result.kappa_quadratic:.3f} on 4 pair(s), below calibration.min_kappa 0.4"
    )
    agreeing = calibration.calibrate(
        [*labels[:0], *(_label(q, t, g) for (q, t), g in human.items())], human, ranks, 0.4
    )
    assert agreeing.usable and agreeing.kappa_quadratic == 1.0 and agreeing.refusal is None
