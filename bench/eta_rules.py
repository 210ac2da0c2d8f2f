"""ETA rules replayed on a pool's model calls timed one by one (`pool_clock.py --calls
--trace`): after every call of each dense system's embedding, and on the lines the shipped
cadence prints, each rule's time left against the seconds the calls actually had left
(bench/README.md, "`rageval pool`: the clock"). A rule is the prior (the cost the run records
before the system: the calibration's fit, then the previous system's) scaled to a speed
measured on the calls so far, or a cost fitted on them; the shipped one is
`embedding_cost.Fit`, driven through `embeddings._Tracker` for the cadence."""

from __future__ import annotations

import numpy as np

from rageval_pipeline.core.retrieval import embeddings
from rageval_pipeline.core.retrieval.embedding_cost import Cost, Fit


def replay(trace: dict, label: str) -> None:
    """Each clock candidate's ETA after every call of each system's embedding (and on the lines
    the shipped cadence prints) against the seconds its calls actually had left."""
    systems = {name: [tuple(c) for c in calls] for name, calls in trace["systems"].items()}
    every = [c for calls in systems.values() for c in calls]
    print(
        f"{label}: {len(every)} calls, {sum(c[2] for c in every):.1f} s, busy loops "
        f"{trace['busy']}, load {trace['load_before']:.1f} -> {trace['load_after']:.1f}"
    )
    priors, fit = [], Fit()
    for rows, size, seconds in trace["calibration"]:
        fit.add(rows, size, seconds)
    fixed, per_token, _ = fit.costs(recent=False)
    prior = Cost(fixed_s=fixed, per_token_s=per_token, tokens_per_char=1.0)
    total = sum(prior.seconds([(r, s)]) for calls in systems.values() for r, s, _ in calls)
    actual = sum(c[2] for c in every)
    print(f"  estimate from the calibration: {total:.1f} s, {100 * (total / actual - 1):+.0f}%")
    for calls in systems.values():  # each embedding's prior: the cost recorded before it
        priors.append(prior)
        fit = Fit()
        for rows, size, seconds in calls:
            fit.add(rows, size, seconds)
        if fit.calls > 20:
            fixed, per_token, _ = fit.costs(recent=False)
            prior = Cost(fixed_s=fixed, per_token_s=per_token, tokens_per_char=1.0)
    printed = [lines(calls, prior) for prior, calls in zip(priors, systems.values(), strict=True)]
    print(
        "  columns (every call | printed lines): n numeric ETAs: |error| median, 90th pct, "
        "within 30%, median error, under-5-s ETAs true"
    )
    print(f"  lines the shipped cadence prints: {sum(map(len, printed))}")
    for name, make in CANDIDATES.items():
        every, shown = [], []
        for prior, calls, at in zip(priors, systems.values(), printed, strict=True):
            clock = make(prior)
            for i, (rows, size, seconds) in enumerate(calls[:-1], 1):
                clock.add(rows, size, seconds)
                eta = clock.eta([(r, s) for r, s, _ in calls[i:]])
                every.append((eta, sum(c[2] for c in calls[i:])))
                if i in at:
                    shown.append(every[-1])
        summary(name, every, shown)


def lines(calls: list[tuple[int, int, float]], prior) -> set[int]:
    """After which calls (counted from 1) the shipped tracker prints a line, the last left out:
    its cadence on the calls' own clock."""
    clock, reports = [0.0], []
    tracker = embeddings._Tracker(
        [(r, s) for r, s, _ in calls],
        reports.append,
        embeddings.PROGRESS_EVERY_S,
        prior,
        clock=lambda: clock[0],
    )
    done = {}
    for i, (_, _, seconds) in enumerate(calls, 1):
        clock[0] += seconds
        tracker.advance(last=i == len(calls))
        done.setdefault(tracker.done, i)
    return {done[r.done] for r in reports[1:-1]}


UNDER_S = 5.0


def summary(what: str, every: list[tuple[float, float]], shown: list) -> None:
    """Per set of ETAs (after every call; on the printed lines): absolute relative error
    (median, 90th percentile), share within 30% and the median error, numeric ETAs only;
    then how many `under UNDER_S` ETAs were true."""
    parts = []
    for pairs in (every, shown):
        numeric = [(eta, left) for eta, left in pairs if eta >= UNDER_S]
        under = [left for eta, left in pairs if eta < UNDER_S]
        relative = np.array([eta / left - 1 for eta, left in numeric]) if numeric else np.zeros(1)
        size = np.abs(relative)
        parts.append(
            f"{len(numeric):3d}: {100 * np.median(size):3.0f}% "
            f"{100 * np.percentile(size, 90):4.0f}% {100 * np.mean(size <= 0.3):3.0f}% "
            f"{100 * np.median(relative):+4.0f}%, "
            f"under {sum(left < UNDER_S for left in under)}/{len(under)}"
        )
    print(f"  {what:38s} | {' | '.join(parts)}")


class Scaled:
    """The prior scaled by actual over predicted seconds of the calls so far, each call's
    weight `forget` times the next's."""

    def __init__(self, prior, forget):
        self.prior, self.forget, self.taken, self.predicted = prior, forget, 0.0, 0.0

    def add(self, rows, size, seconds):
        self.taken = self.taken * self.forget + seconds
        self.predicted = self.predicted * self.forget + self.prior.seconds([(rows, size)])

    def eta(self, plan):
        ratio = self.taken / self.predicted if self.predicted else 1.0
        return ratio * self.prior.seconds(plan)


class Decay:
    """The prior scaled by actual over predicted seconds of the calls so far, each call's
    weight halved every `half` seconds of calls after it, and each counted at most `bound`
    times its due at the speed so far."""

    def __init__(self, prior, half, bound=float("inf")):
        self.prior, self.half, self.bound, self.taken, self.predicted = prior, half, bound, 0, 0

    def add(self, rows, size, seconds):
        due = self.prior.seconds([(rows, size)])
        speed = self.taken / self.predicted if self.predicted else 1.0
        keep = 0.5 ** (seconds / self.half)
        self.taken = self.taken * keep + min(seconds, self.bound * speed * due)
        self.predicted = self.predicted * keep + due

    def eta(self, plan):
        ratio = self.taken / self.predicted if self.predicted else 1.0
        return ratio * self.prior.seconds(plan)


class Median:
    """The prior scaled by the median of actual over predicted seconds of the last `k` calls
    (one call preempted by another job's time slice moves it little)."""

    def __init__(self, prior, k):
        self.prior, self.k, self.ratios = prior, k, []

    def add(self, rows, size, seconds):
        self.ratios.append(seconds / self.prior.seconds([(rows, size)]))

    def eta(self, plan):
        return float(np.median(self.ratios[-self.k :])) * self.prior.seconds(plan)


class Window:
    """The prior scaled by actual over predicted seconds of the calls of the last `span`
    seconds (cost-weighted: a ratio of sums)."""

    def __init__(self, prior, span):
        self.prior, self.span, self.calls = prior, span, []

    def add(self, rows, size, seconds):
        self.calls.append((seconds, self.prior.seconds([(rows, size)])))

    def eta(self, plan):
        taken = predicted = 0.0
        for seconds, expected in reversed(self.calls):
            taken, predicted = taken + seconds, predicted + expected
            if taken >= self.span:
                break
        return (
            taken / predicted * self.prior.seconds(plan) if predicted else self.prior.seconds(plan)
        )


class OwnFit:
    """Fixed plus per token fitted on the calls so far (`Fit`, recent or all alike); the prior
    until two sizes are timed."""

    def __init__(self, prior, recent):
        self.fit, self.prior, self.recent = Fit(), prior, recent

    def add(self, rows, size, seconds):
        self.fit.add(rows, size, seconds)

    def eta(self, plan):
        fixed, per_token, determinate = self.fit.costs(recent=self.recent)
        if not determinate:
            return self.prior.seconds(plan)
        return Cost(fixed_s=fixed, per_token_s=per_token, tokens_per_char=1.0).seconds(plan)


class _Alone:
    """The prior, no speed measured."""

    def __init__(self, prior):
        self.prior = prior

    def add(self, rows, size, seconds):
        pass

    def eta(self, plan):
        return self.prior.seconds(plan)


class Shipped:
    """What `embeddings._Tracker` prices the calls left at: `Fit(prior).scaled()`."""

    def __init__(self, prior):
        self.fit = Fit(prior)

    def add(self, rows, size, seconds):
        self.fit.add(rows, size, seconds)

    def eta(self, plan):
        return self.fit.scaled().seconds(plan)


CANDIDATES = {
    "shipped: half-life 10 s, bound 2x": Shipped,
    "0.8 a call (before)": lambda p: Scaled(p, 0.8),
    "all calls alike": lambda p: Scaled(p, 1.0),
    "half-life 10 s, no bound": lambda p: Decay(p, 10.0),
    "half-life 30 s, no bound": lambda p: Decay(p, 30.0),
    "half-life 10 s, bound 1.5x": lambda p: Decay(p, 10.0, 1.5),
    "half-life 10 s, bound 3x": lambda p: Decay(p, 10.0, 3.0),
    "half-life 30 s, bound 2x": lambda p: Decay(p, 30.0, 2.0),
    "last 30 s (window)": lambda p: Window(p, 30.0),
    "median of the last 9 calls": lambda p: Median(p, 9),
    "median of the last 31 calls": lambda p: Median(p, 31),
    "prior alone": _Alone,
    "own fit, all calls alike": lambda p: OwnFit(p, False),
    "own fit, half-life 10 s": lambda p: OwnFit(p, True),
}
