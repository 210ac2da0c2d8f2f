"""The deciding policy of a run, and the blocking `policy` check when it is looser than the one
its baseline was recorded under.

A change under review could also edit how it is judged (`inconclusive: warn`, `compare: []`, a
wider band, a larger alpha, a weaker rule): the gate compares the policy that decides the run
with the one the baseline recorded and blocks on every loosened field, old -> new, unless the
policy file records the approval of that very change (`loosened: [{field, to, reason}]`).
Tightening passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from rageval_pipeline.core.gate.comparable import comparability
from rageval_pipeline.core.gate.deciding import (
    RULE_STRENGTH,
    BandValues,
    BreakageValues,
    DecidingPolicy,
    SpikeValues,
    UnjudgedValues,
)
from rageval_pipeline.core.gate.decision import inconclusive_mode
from rageval_pipeline.core.gate.evaluation import Evaluation
from rageval_pipeline.core.gate.models import Baseline, Check, RunSummary
from rageval_pipeline.core.gate.policy import Approval, Band, GateRules
from rageval_pipeline.core.gate.quality import decided_measures
from rageval_pipeline.core.gate.rules import Threshold
from rageval_pipeline.core.measures.names import Measure, parse_measure


def deciding_policy(
    rules: GateRules, compared: Iterable[Measure], decided: Iterable[Measure] = ()
) -> DecidingPolicy:
    """The values of `rules` that decide a run whose compared measures (as the policy resolves
    them) are `compared`, and which were decided on `decided` (default: `compared`)."""
    stats, spike, unjudged = rules.statistics, rules.spike, rules.unjudged
    measures = list(compared)
    decided = list(decided) or measures
    bands = {}
    for measure in dict.fromkeys([*measures, *decided]):
        band = rules.tolerance.for_measure(measure)
        bands[str(measure)] = BandValues(relative=band.relative, absolute=band.absolute)
    return DecidingPolicy(
        rule=stats.rule,
        alpha=stats.alpha,
        inconclusive=stats.inconclusive,
        compare=[str(m) for m in measures],
        decided=[str(m) for m in decided],
        compare_listed=rules.compare is not None,
        bands=bands,
        spike=SpikeValues(
            measure=None if spike.measure is None else str(spike.measure),
            drop=spike.drop,
            share=spike.share,
        ),
        unjudged=UnjudgedValues(
            measure=str(unjudged.measure),
            drop=unjudged.drop,
            blocking=unjudged.blocking,
            broken=unjudged.broken,
        ),
        breakage=BreakageValues(**rules.breakage.model_dump()),
        mean_within=stats.mean_within,
        anchor_factor=rules.anchor.factor,
        seed=stats.seed,
        resamples=stats.resamples,
        thresholds=_thresholds(rules),
    )


def _thresholds(rules: GateRules) -> dict[str, float]:
    """The blocking limit per measure (`thresholds` and blocking `threshold` rules), the
    strictest where several name one measure."""
    limits: dict[str, float] = {}
    for rule in rules.limits():
        if isinstance(rule, Threshold) and rule.blocking:
            name, pick = str(rule.measure), max if rule.measure.higher_is_better else min
            limits[name] = pick(limits.get(name, rule.min), rule.min)
    return limits


def policy_measures(run: Evaluation) -> list[Measure]:
    """The measures the policy decides `run` on when its units did not change (the run against
    itself): the `compare` list, else the primary measure alone (`decided_measures`). What a
    loosening of `compare` or of the primary measure (`spike.measure`) is judged on; a chunking
    change deciding on the token budgets is not one."""
    as_baseline = Baseline.model_construct(**dict(run.summary))
    return decided_measures(run, as_baseline, comparability(run, as_baseline))[0]


def recorded_policy(summary: RunSummary, rules: GateRules) -> DecidingPolicy:
    """The deciding policy a baseline recorded from `summary` under `rules` keeps."""
    return deciding_policy(rules, policy_measures(Evaluation(summary, rules)))


class Loosened(NamedTuple):
    """One field of the deciding policy that judges more leniently than the baseline's, or
    that needs the same approval (`why`: how, when it is not plainly more lenient)."""

    field: str
    old: Any
    new: Any
    why: str = ""

    def __str__(self) -> str:
        why = f" ({self.why})" if self.why else ""
        return f"{self.field}: {_shown(self.old)} -> {_shown(self.new)}{why}"


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _wider(a: float | None, b: float | None) -> bool:
    return (b or 0.0) > (a or 0.0) + 1e-12


def loosened(
    old: DecidingPolicy, new: DecidingPolicy, means: Mapping[str, float] | None = None
) -> list[Loosened]:
    """Every field on which `new` judges more leniently than `old`, in a fixed order. `means`:
    the baseline's, on which a band is compared as the drop it tolerates there."""
    out = []
    if RULE_STRENGTH.get(new.rule, 0) < RULE_STRENGTH.get(old.rule, 0):
        out.append(Loosened("statistics.rule", old.rule, new.rule))
    if new.alpha > old.alpha + 1e-12:
        out.append(Loosened("statistics.alpha", old.alpha, new.alpha))
    if old.inconclusive == "block" and new.inconclusive != "block":
        out.append(Loosened("statistics.inconclusive", old.inconclusive, new.inconclusive))
    # What decides, listed or the primary measure: a measure that no longer decides only
    # warns. (A policy recorded before `decided` was kept listed every shared measure when it
    # had no `compare`: nothing to hold a run to then.)
    if (old.compare_listed or old.decided) and set(old.compare) - set(new.compare):
        out.append(Loosened("compare", old.compare, new.compare))
    for measure in (m for m in old.compare if m in new.compare):
        out += _band_loosened(measure, old.bands.get(measure), new.bands.get(measure), means)
    for part in ("drop", "share"):
        a, b = getattr(old.spike, part), getattr(new.spike, part)
        if _wider(a, b):
            out.append(Loosened(f"spike.{part}", a, b))
    if old.unjudged.blocking and not new.unjudged.blocking:
        out.append(Loosened("unjudged.blocking", True, False))
    if _wider(old.unjudged.drop, new.unjudged.drop):
        out.append(Loosened("unjudged.drop", old.unjudged.drop, new.unjudged.drop))
    if _wider(old.unjudged.broken, new.unjudged.broken):
        out.append(Loosened("unjudged.broken", old.unjudged.broken, new.unjudged.broken))
    if _wider(old.mean_within, new.mean_within) and old.mean_within is not None:
        out.append(Loosened("statistics.mean_within", old.mean_within, new.mean_within))
    if old.unjudged.measure != new.unjudged.measure:
        out.append(Loosened("unjudged.measure", old.unjudged.measure, new.unjudged.measure))
    out += _breakage_loosened(old.breakage, new.breakage)
    if _wider(old.anchor_factor, new.anchor_factor):
        out.append(Loosened("anchor.factor", old.anchor_factor, new.anchor_factor))
    return out + _drawn_loosened(old, new) + _thresholds_loosened(old.thresholds, new.thresholds)


def _band_loosened(
    measure: str,
    before: BandValues | None,
    after: BandValues | None,
    means: Mapping[str, float] | None,
) -> list[Loosened]:
    """The parts of a measure's band that widened. With the baseline's mean known, only when
    the band it tolerates there (the wider of relative x mean and absolute, `Band.allowed`)
    widened: moving from a relative band to an absolute one (or back) is judged by the drop it
    lets pass, not by which part is set."""
    if before is None or after is None:
        return []
    parts = [
        Loosened(f"tolerance[{measure}].{part}", a, b)
        for part in ("relative", "absolute")
        if _wider(a := getattr(before, part), b := getattr(after, part))
    ]
    mean = (means or {}).get(measure)
    if not parts or mean is None:
        return parts
    was, now = _allowed(before, mean), _allowed(after, mean)
    if not _wider(was, now):
        return []
    why = f"the band at the baseline's {mean:.6g}: {was:.6g} -> {now:.6g}"
    return [part._replace(why=why) for part in parts]


def _allowed(band: BandValues, mean: float) -> float:
    return Band(relative=band.relative, absolute=band.absolute).allowed(mean)


def _drawn_loosened(old: DecidingPolicy, new: DecidingPolicy) -> list[Loosened]:
    """Another seed re-draws the resampling, so a change could re-draw until it passes: it
    needs the approval a loosening does. Fewer resamples make the interval noisier. A policy
    recorded without them (None) is not compared."""
    out = []
    if old.seed is not None and new.seed is not None and old.seed != new.seed:
        why = "a new seed re-draws the resampling; record it in `loosened:` with a reason"
        out.append(Loosened("statistics.seed", old.seed, new.seed, why))
    if old.resamples is not None and (new.resamples or 0) < old.resamples:
        out.append(Loosened("statistics.resamples", old.resamples, new.resamples))
    return out


def _thresholds_loosened(
    old: dict[str, float] | None, new: dict[str, float] | None
) -> list[Loosened]:
    """A blocking limit lowered (raised, when lower is better) or removed."""
    if old is None or new is None:
        return []
    out = []
    for name, before in sorted(old.items()):
        after = new.get(name)
        higher = parse_measure(name).higher_is_better
        if after is None or (_wider(after, before) if higher else _wider(before, after)):
            out.append(Loosened(f"thresholds[{name}]", before, after))
    return out


def _breakage_loosened(old: BreakageValues | None, new: BreakageValues | None) -> list[Loosened]:
    """The guard fires less often: off, more broken queries needed, a higher value to fall
    from or a lower one to fall to."""
    if old is None or not old.blocking:
        return []
    if new is None or not new.blocking:
        return [Loosened("breakage.blocking", True, False)]
    out = [
        Loosened(f"breakage.{part}", getattr(old, part), getattr(new, part))
        for part in ("count", "share", "high")
        if _wider(getattr(old, part), getattr(new, part))
    ]
    if _wider(new.low, old.low):
        out.append(Loosened("breakage.low", old.low, new.low))
    return out


def _same(a: Any, b: Any) -> bool:
    """An approval's `to` against a loosened value: numbers as numbers, lists as sets of
    names (YAML reads `[nDCG@10]` and `[ nDCG@10 ]` alike), a removed value as `null` or
    `unset` (as the check shows it), the rest as text."""
    if b is None:
        return a is None or a == "unset"
    if isinstance(a, list) and isinstance(b, list):
        return sorted(map(str, a)) == sorted(map(str, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= 1e-12
    return str(a) == str(b)


def approved(change: Loosened, approvals: list[Approval]) -> Approval | None:
    """The approval in the policy file that names this loosening (its field and new value)."""

    def to(a: Approval) -> Any:  # an approval may name the inconclusive mode by its old name
        return inconclusive_mode(a.to) if a.field == "statistics.inconclusive" else a.to

    return next(
        (a for a in approvals if a.field == change.field and _same(to(a), change.new)), None
    )


def policy_check(run: Evaluation, now: DecidingPolicy, stored: Baseline | None) -> Check | None:
    """The `policy` check: blocking when `now` is looser than the policy `stored` (the
    baseline) was recorded under on a field the policy file does not approve; passing, with
    the approvals named, otherwise. None when the baseline recorded no policy or nothing was
    loosened."""
    recorded = None if stored is None else stored.policy
    if recorded is None:
        return None
    changes = loosened(recorded, now, stored.measures)
    if not changes:
        return None
    approvals = run.rules.loosened
    open_ = [c for c in changes if approved(c, approvals) is None]
    said = [
        f"{c} (approved: {a.reason})" for c in changes if (a := approved(c, approvals)) is not None
    ]
    if open_:
        fields = "; ".join(map(str, open_))
        return run.check(
            kind="policy",
            passed=False,
            blocking=True,
            message=f"{run.label} is judged under a looser policy than its baseline was recorded "
            f"under ({recorded.digest} -> {now.digest}): {fields}. Revert it, or record the "
            "approval in the policy file: loosened: [{field: ..., to: ..., reason: ...}]"
            + (f"; approved: {'; '.join(said)}" if said else ""),
        )
    return run.check(
        kind="policy",
        passed=True,
        blocking=False,
        message=f"{run.label} is judged under a looser policy than its baseline's, approved in "
        f"the policy file: {'; '.join(said)}",
    )
