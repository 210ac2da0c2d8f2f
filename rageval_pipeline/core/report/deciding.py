"""The first screen's deciding policy: per run the settings that decided it, and each field
loosened since the policy its baseline was recorded under (core/gate/policy_diff.py)."""

from __future__ import annotations

from rageval_pipeline.core.gate import Verdict
from rageval_pipeline.core.report.blocks import Block, Bullets


def policy_blocks(verdict: Verdict) -> list[Block]:
    """The deciding policy of each run (rule, alpha, inconclusive mode, compared measures with
    their bands, spike and unjudged settings), and each field loosened since its baseline."""
    lines = []
    for r in verdict.changes:
        if r.policy is None:
            continue
        since = ""
        if r.baseline_policy is not None and r.baseline_policy.digest != r.policy.digest:
            since = f" (the baseline's: {r.baseline_policy.digest})"
        lines.append(
            f"{r.dataset}/{r.system} decided under policy {r.policy.digest}{since}: "
            f"{r.policy.describe()}."
        )
        if r.baseline_policy is not None and (unknown := r.baseline_policy.unrecorded):
            lines.append(
                f"{r.dataset}/{r.system}: its baseline's policy was recorded without "
                f"{', '.join(unknown)}, so a change of them is not checked; re-record the "
                "baseline (`rageval baseline update`) to check it."
            )
    loosened = [c.message for c in verdict.checks if c.kind == "policy"]
    return ([Bullets(lines)] if lines else []) + ([Bullets(loosened)] if loosened else [])
