"""What a baseline replaced, and the anchor it is held to.

`rageval baseline update` keeps, in each baseline, the values and date of the one it replaced
(`replaced`) and its **anchor** (`anchor`): the last baseline recorded without `--accept-worse`
that no later update fell below, or one a team pinned. The gate compares every run with the
anchor too, with a cumulative band (`anchor.factor` x the band, `core/gate/anchoring.py`), so a
chain of updates each within the band cannot walk the baseline down unseen. Plain values only:
baselines hold these, `core/gate/baselines.py` writes them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Lineage(BaseModel):
    """The baseline an update replaced: when it was recorded, from which run, its means."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recorded_at: str
    source_run_id: str
    fingerprint: str
    measures: dict[str, float]
    accepted_worse: str | None = None  # the reason it was itself accepted as worse


class Anchor(Lineage):
    """The baseline a run is also compared with, with the cumulative band: its per-query values
    for the paired statistics, and the suite they were measured on."""

    per_query: dict[str, dict[str, float]] = Field(default_factory=dict)
    suite: str | None = None
    query_digests: dict[str, str] = Field(default_factory=dict)  # per query, what decides it
    pinned: bool = False  # a team chose it (`--pin-anchor`) rather than the rule above
