"""The deciding policy: the settings of the gate policy that decided a run, as values.

A baseline records the one it was recorded under and every verdict the one that judged each
run, so a change that loosens how it is judged is seen beside the change it judges
(`core/gate/policy_diff.py` compares them). Only plain values here: baselines and verdicts hold
it, and the policy module builds it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

# How strong each rule's guarantee against passing a drop of the band is: `interval` and `ppi`
# rule out the drop before passing (non-inferiority), `significance` fails only an established
# drop, `point` reads the mean alone.
RULE_STRENGTH = {"interval": 3, "ppi": 3, "significance": 2, "point": 1}


# The fields a policy recorded before they were kept lacks, by the names the policy check uses.
UNRECORDED = {
    "seed": "statistics.seed",
    "resamples": "statistics.resamples",
    "thresholds": "thresholds",
}


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BandValues(_Values):
    """The tolerated worsening of one compared measure (None: that part is unset)."""

    relative: float | None = None
    absolute: float | None = None


class UnjudgedValues(_Values):
    measure: str
    drop: float
    blocking: bool
    broken: float = 0.5  # the share of judged documents lost that blocks as a broken run


class BreakageValues(_Values):
    """The breakage guard: a query broke falling from `high` to `low`; `count` (or `share`
    of the answered queries) of them block."""

    high: float
    low: float
    count: int
    share: float
    blocking: bool


class SpikeValues(_Values):
    measure: str | None = None
    drop: float
    share: float


class DecidingPolicy(_Values):
    """What decided a run against its baseline: the rule, its alpha, what an inconclusive
    measure does, the compared measures with each one's band, and the breakage (spike) and
    unjudged settings."""

    rule: str
    alpha: float
    inconclusive: str
    compare: list[str] = Field(description="the compared measures, as the policy resolved them")
    # The measures that decided the run: the primary one when the policy lists no `compare`,
    # the token-budget ones after a chunking change (`quality.decided_measures`). What the
    # report shows; `compare` is what the policy diff compares (a chunking change is no
    # loosening). Empty in policies recorded before it was kept: then `compare` decided.
    decided: list[str] = Field(default_factory=list)
    # Whether the policy lists `compare` (else: every measure both run and baseline have, so a
    # measure the run no longer computes leaves the list without any policy loosening).
    compare_listed: bool = True
    bands: dict[str, BandValues] = Field(default_factory=dict)
    spike: SpikeValues
    unjudged: UnjudgedValues
    breakage: BreakageValues | None = None  # None: recorded before the guard existed
    mean_within: float | None = None  # a PASS needs the mean drop within this share of the band
    anchor_factor: float = 2.0  # the anchor's cumulative band, in bands
    # The resampling's seed and size, and the blocking limits per measure (a minimum, a maximum
    # when lower is better). None: recorded before they were kept, so unknown and not compared
    # (`UNRECORDED`), and left out of the digest so such a policy keeps its own.
    seed: int | None = None
    resamples: int | None = None
    thresholds: dict[str, float] | None = None

    @property
    def unrecorded(self) -> list[str]:
        """The fields this policy did not record (a baseline recorded before they were kept)."""
        return [name for field, name in UNRECORDED.items() if getattr(self, field) is None]

    @model_validator(mode="before")
    @classmethod
    def _derived_digest(cls, data: Any) -> Any:
        """The stored `digest` is derived from the values, so it is read back by recomputing."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "digest"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def digest(self) -> str:
        """A stable digest of the values (16 hex digits), for the reports and the baselines."""
        # `decided` is what a run was decided on, not a setting: two runs judged under one
        # policy share its digest whatever each decided on.
        unknown = {field for field in UNRECORDED if getattr(self, field) is None}
        values = self.model_dump(mode="json", exclude={"digest", "decided", *unknown})
        canonical = json.dumps(values, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def describe(self) -> str:
        """One line: `rule interval, alpha 0.05, inconclusive blocks; compared nDCG@10 (band
        5%); spike 20% drop on 25% of queries; unjudged +0.1 warns`."""
        bands = ", ".join(
            f"{m} (band {_band(self.bands.get(m))})" for m in self.decided or self.compare
        )
        spike = self.spike
        unjudged = self.unjudged
        return (
            f"rule {self.rule}, alpha {self.alpha:g}, inconclusive "
            f"{'blocks' if self.inconclusive == 'block' else 'blocks only a likely drop'}; "
            "compared "
            f"{bands or 'nothing'}; spike: {spike.drop:g} drop on over {spike.share:.0%} of "
            f"queries blocks; unjudged {unjudged.measure} -{unjudged.drop:g} "
            f"{'blocks' if unjudged.blocking else 'warns'}; {_guard(self.breakage)}anchor band "
            f"{self.anchor_factor:g}x{_drawn(self)}{_limits(self.thresholds)}"
        )


def _guard(guard: BreakageValues | None) -> str:
    if guard is None or not guard.blocking:
        return ""
    return (
        f"breakage: {guard.count} or {guard.share:.0%} of answered queries falling from "
        f">= {guard.high:g} to <= {guard.low:g} block; "
    )


def _drawn(policy: DecidingPolicy) -> str:
    if policy.seed is None or policy.resamples is None:
        return ""
    return f"; {policy.resamples} resamples, seed {policy.seed}"


def _limits(thresholds: dict[str, float] | None) -> str:
    if not thresholds:
        return ""
    return "; thresholds " + ", ".join(f"{m} {v:g}" for m, v in sorted(thresholds.items()))


def _band(band: BandValues | None) -> str:
    if band is None:
        return "–"
    parts = []
    if band.relative is not None:
        parts.append(f"{band.relative * 100:g}%")
    if band.absolute is not None:
        parts.append(f"{band.absolute:g}")
    return " or ".join(parts) or "0"
