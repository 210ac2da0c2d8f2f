"""The per-measure decision against the baseline: the rule, its statistics and its power.

Default rule `interval`, a non-inferiority design (docs/gate.md, "The decision"). With `gain` the
paired delta run - baseline oriented so that positive is better, [low, high] its (1 - alpha)
bootstrap interval and `band` the tolerance:

- PASS when low >= -band: the data rule out a drop beyond the band (at 1 - alpha/2, one-sided),
  so a true drop at or beyond the band passes at most alpha/2 of the time (about 4% at 20
  queries, where the percentile bootstrap runs narrow; below MIN_PASS_QUERIES only a change
  that moved no query passes), and the mean drop is within `mean_within` (half) of the band.
  Real paired differences are skewed: a few queries lose a lot, and a sample that misses them
  has a narrow interval around a mean that already used most of the band (a resampled nfcorpus
  tweak shifted to a drop of the band passed 13% of 50-query suites on the interval alone,
  none with the mean within half the band; docs/gate.md). A change with no effect loses nothing
  by it where the suite resolves the band. An unchanged system (every per-query value equal)
  has the zero-width interval [0, 0]: it passes, a band of 0 included.
- FAIL when the (1 - alpha/m) interval's high end < -band, m the measures decided together: a
  drop beyond the band is established, Bonferroni-corrected so that the m claims together are
  wrong at most alpha/2 of the time.
- INCONCLUSIVE otherwise: the suite cannot tell a drop of the band from none. Under the default
  `statistics.inconclusive: block` it blocks, so a PASS is earned, never defaulted to. Under
  `block_likely` (formerly `warn`, still accepted) it blocks only a *likely* drop: the point
  estimate beyond the band while the (1 - alpha) interval excludes zero; the rest warn.

Across measures PASS is an intersection-union test (the run passes only when every compared
measure does), which needs no correction: a false PASS needs every measure's own test wrong.
IMPROVED (the interval's low end above +band) decides nothing: it offers a reviewed baseline update.
`significance` (a Holm-corrected randomization test on a mean beyond the band) and `point` (the
mean alone) remain as options; `ppi` decides as `interval` on the PPI++ interval, its
human-judged sample the size MIN_PASS_QUERIES counts.

The suite's power under this rule (`Resolution`): a drop of band + MDE fails with probability
`power`, MDE = (z(1 - alpha/2) + z(power)) * sd / sqrt(n) from the SD of the paired differences.
The suite *resolves* the band when (z(1 - alpha/2) + z(0.9)) * sd / sqrt(n) <= band: then no
change passes at least 90% of the time, and a drop of twice the band fails as often.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Annotated, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from rageval_pipeline.core.statistics.paired import (
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedTest,
    paired_test,
    with_holm,
)

# Values read back from 6-decimal baselines must not fail a comparison that sits on the boundary.
EPS = 1e-9
# Stored per-query values keep 6 decimals: an interval within this of 0 is an unchanged system.
ROUNDING = 1e-6
Outcome = Literal["pass", "fail", "inconclusive"]
# Below this many paired queries the percentile bootstrap interval is too narrow to pass on
# (bench/operating_characteristics.py: a true drop of the band passes 6.9% of the time at 10
# queries, 8.6% at 5; 4.1% at 20): a measure passes there only when nothing moved per query.
# Under PPI the count is the human-judged sample's, whose normal interval is as narrow there.
MIN_PASS_QUERIES = 20
RESOLVE_POWER = 0.9  # the band is resolved when no change passes and 2x band fails this often
# PPI++'s effective sample per human-judged query with ~10x as many LLM-judged ones: its interval
# is 0.71 of the human-only width (docs/statistics.md), so about 2 (1 / 0.71^2).
PPI_GAIN = 2.0
PPI_LLM_PER_HUMAN = 10
_K = TypeVar("_K", bound=Hashable)


def inconclusive_mode(mode: object) -> object:
    """`warn` was the old name of `block_likely`: it never passes a likely drop any more."""
    return "block_likely" if mode == "warn" else mode


class Statistics(BaseModel):
    """How a run's measures are judged against the baseline from per-query values (above)."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["interval", "significance", "point", "ppi"] = "interval"
    inconclusive: Annotated[
        Literal["block", "block_likely"], BeforeValidator(inconclusive_mode)
    ] = Field(
        default="block",
        description="block: every change the suite cannot resolve blocks; block_likely (old "
        "name: warn): only a likely drop does (beyond the band, interval excluding 0)",
    )
    mean_within: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="a PASS also needs the mean drop within this share of the band",
    )
    alpha: float = Field(default=DEFAULT_ALPHA, gt=0, lt=1)
    resamples: int = Field(default=DEFAULT_RESAMPLES, ge=100, le=1_000_000)
    seed: int = Field(default=DEFAULT_SEED, ge=0)
    power: float = Field(default=DEFAULT_POWER, gt=0, lt=1, description="for the detectable drop")


class Resolution(BaseModel):
    """What the suite can tell on one measure under the rule (numbers in the measure's units)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    band: float  # the tolerated drop
    power: float
    detectable: float  # the drop that FAILs with `power`: band + MDE
    resolves: bool  # (z(1 - alpha/2) + z(0.9)) * sd / sqrt(n) <= band
    queries: int  # paired queries now (under PPI: the human-judged ones)
    needed: int | None  # queries that would resolve the band (None: a band of 0 never is)
    needed_ppi: int | None  # human-judged queries that would, with PPI (PPI_GAIN)
    # Set when PPI decided: its LLM-judged queries per human-judged one, kept in `needed_ppi`,
    # whose gain is then the measured effective n per human-judged query.
    llm_per_human: float | None = None
    # Queries to add before an interval may pass, when the query floor decided (else 0).
    floor: int = 0


@dataclass(frozen=True)
class Judgement:
    """One measure's decision: its outcome, whether it blocks, and an established gain.
    `floor`: the query floor decided (the interval alone would have passed); `off_centre`: the
    interval ruled the drop out but the mean used more than `mean_within` of the band; `likely`:
    an inconclusive drop the data make likely (beyond the band, its interval excluding 0)."""

    outcome: Outcome
    blocks: bool
    improved: bool
    floor: bool = False
    likely: bool = False
    off_centre: bool = False


def _z(p: float) -> float:
    # The standard library's normal quantiles: importing scipy.stats costs a Dagster job ~1.7 s.
    return NormalDist().inv_cdf(p)


def tests(
    pairs: dict[_K, tuple[np.ndarray, np.ndarray]], stats: Statistics, *, family: int | None = None
) -> dict[_K, PairedTest]:
    """Per measure the paired test of (baseline, run) values, decided together: each carries its
    (1 - alpha/m) interval for FAIL claims and its Holm-adjusted p-value; m is `family`, the
    measures decided together (these pairs unless others are, as PPI deltas)."""
    family = len(pairs) if family is None else family
    return with_holm(
        {
            key: paired_test(
                reference,
                value,
                resamples=stats.resamples,
                seed=stats.seed,
                alpha=stats.alpha,
                power=stats.power,
                family=family,
            )
            for key, (reference, value) in pairs.items()
        }
    )


def _sample(test: PairedTest) -> int:
    """The queries the interval's validity rests on: under PPI its human-judged sample (3 of 30
    LLM-judged passed a drop of the band 14.6% of the time, bench/operating_characteristics.py)."""
    return test.n if test.human_only is None else test.human_only.n


def _oriented(low: float | None, high: float | None, sign: float) -> tuple[float, float] | None:
    if low is None or high is None:
        return None
    return (low, high) if sign > 0 else (-high, -low)


def judge(
    higher_is_better: bool, delta: float, test: PairedTest | None, band: float, stats: Statistics
) -> Judgement:
    """The decision on one measure: `delta` is its mean run - baseline (what decides when no
    per-query interval exists), `test` its paired test, `band` the tolerated drop (>= 0)."""
    sign = 1.0 if higher_is_better else -1.0
    interval = None if test is None else _oriented(test.ci_low, test.ci_high, sign)
    if stats.rule == "point" or test is None or interval is None:
        gain = sign * delta
        outcome: Outcome = "fail" if gain < -band - EPS else "pass"
        return Judgement(outcome, outcome == "fail", test is not None and gain > band + EPS)
    gain = sign * test.delta
    floor = off_centre = False
    if stats.rule == "significance":
        significant = test.p_holm is not None and test.p_holm < stats.alpha
        outcome = "pass" if gain >= -band - EPS else ("fail" if significant else "inconclusive")
        improved = gain > band + EPS and significant
    else:  # interval, ppi: non-inferiority
        family = _oriented(test.family_low, test.family_high, sign) or interval
        spread = interval[1] - interval[0] > EPS
        unmoved = max(abs(interval[0]), abs(interval[1])) <= ROUNDING
        trusted = _sample(test) >= MIN_PASS_QUERIES or not spread
        ruled_out = interval[0] >= -band - EPS
        centred = gain >= -stats.mean_within * band - EPS
        if unmoved or (ruled_out and centred and trusted):
            outcome = "pass"
        else:
            outcome = "fail" if family[1] < -band - EPS else "inconclusive"
            off_centre = ruled_out and not centred and outcome == "inconclusive"
            floor = ruled_out and centred and outcome == "inconclusive"
        improved = interval[0] > band + EPS
    likely = outcome == "inconclusive" and gain < -band - EPS and interval[1] < -EPS
    blocks = outcome == "fail" or (
        outcome == "inconclusive" and (stats.inconclusive == "block" or likely)
    )
    return Judgement(outcome, blocks, improved, floor, likely, off_centre)


def queries_text(n: int) -> str:
    """`1 query`, `2 queries`."""
    return f"{n} {'query' if n == 1 else 'queries'}"


def floor_gap(test: PairedTest) -> int:
    """The paired (under PPI: human-judged) queries to add before an interval may pass."""
    return max(MIN_PASS_QUERIES - _sample(test), 0)


def resolution(test: PairedTest | None, band: float, stats: Statistics) -> Resolution | None:
    """The suite's power on one measure under the rule (None without a per-query MDE, or
    under `point` and `significance`, which decide on other grounds)."""
    if stats.rule not in ("interval", "ppi") or test is None or test.mde is None or test.n < 2:
        return None
    z_alpha = _z(1 - stats.alpha / 2)
    se = test.mde / (z_alpha + _z(stats.power))
    # No change passes RESOLVE_POWER of the time when both PASS conditions hold that often: the
    # interval's low end above -band, and the mean within `mean_within` of the band.
    centred = _z(RESOLVE_POWER) / stats.mean_within if stats.mean_within > 0 else math.inf
    margin = max(z_alpha + _z(RESOLVE_POWER), centred) * se
    # Under PPI the gap is counted in human-judged queries: the interval is worth effective_n
    # of them alone, and each drawn one is worth effective_n / n at this LLM-judged share.
    human = test.human_only if test.effective_n else None
    worth = test.effective_n if human is not None and test.effective_n else test.n
    gain = worth / human.n if human is not None else PPI_GAIN
    queries = _sample(test)
    if margin <= EPS:  # (a zero-width PPI interval is worth infinitely many)
        needed: int | None = max(queries, MIN_PASS_QUERIES)
    elif band <= EPS:
        needed = None
    else:
        needed = max(MIN_PASS_QUERIES, math.ceil(worth * (margin / band) ** 2))
    return Resolution(
        band=band,
        power=stats.power,
        detectable=band + test.mde,
        resolves=margin <= band + EPS and _sample(test) >= MIN_PASS_QUERIES,
        queries=queries,
        needed=needed,
        needed_ppi=None if needed is None else max(2, math.ceil(needed / gain)),
        llm_per_human=None if human is None else test.n / human.n,
    )


def resolution_text(res: Resolution) -> str:
    """One clause for a check's message: the detectable drop beside the band, and the gap."""
    judged = "" if res.llm_per_human is None else " human-judged, with PPI"
    text = (
        f"this suite fails a drop of {res.detectable:.4f} or more with {res.power:.0%} power "
        f"(band {res.band:.4f}, {res.queries} queries{judged})"
    )
    if res.resolves:
        return text + " and resolves the band"
    if res.needed is None:
        return text + "; a band of 0 is resolved only by identical per-query values"
    ppi = res.needed_ppi or 0
    return (
        f"{text}; to resolve the band it needs about {res.needed} human-judged queries, or "
        f"about {ppi} in a random sample of {llm_judged(res)} LLM-judged ones with PPI"
    )


def llm_judged(res: Resolution) -> int:
    """The LLM-judged queries beside `needed_ppi` human-judged ones: this suite's share under
    PPI, else PPI_LLM_PER_HUMAN."""
    return round((res.needed_ppi or 0) * (res.llm_per_human or PPI_LLM_PER_HUMAN))
