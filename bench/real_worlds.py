"""The gate's whole verdict on worlds resampled from real paired per-query differences.

A world is one real shape of bench/real_shapes.json (a tweak, a system swap or a sparse
breakage: the baseline's and the run's per-query nDCG@10 on one suite) moved so that the mean
of its differences is exactly `effect` x band, band the default tolerance (5% of the shape's
baseline mean). A suite of n queries draws n of its pairs with replacement; under `stratified`
a breakage shape's suite holds its share of broken queries (at least one), the others drawn
from the rest, so the breakage is in every suite as the shape has it in its own.

The move keeps the shape:

- `shift` (default): the same amount added to every run value: the differences keep their
  exact shape (the values may leave [0, 1] by that amount, which no check reads);
- `tilt`: the pairs reweighted by exp(theta x difference) until the weighted mean difference is
  the target (Efron's tilted bootstrap): only real pairs, a drop made of more losing queries.

Each suite becomes a RunSummary and its Baseline, decided by the shipped `core.gate.decide`
under the default policy (`GateRules()`: every measure both have compared, the spike check,
and whatever else the shipped rule holds), with the default statistics but fewer resamples.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize

from rageval_pipeline.core.gate import decide
from rageval_pipeline.core.gate.decision import Statistics
from rageval_pipeline.core.gate.models import Baseline, RunSummary, Verdict
from rageval_pipeline.core.gate.policy import GatePolicy, GateRules

SHAPES = Path(__file__).resolve().parent / "real_shapes.json"
# Table rows: (shape kind, stratified). "breakage, sparse": plain resampling, so a suite may draw
# none of the broken queries (a suite of n holds one with probability 1 - (1 - p)^n).
KINDS = {
    "tweak": ("tweak", False),
    "swap": ("swap", False),
    "breakage": ("break", True),
    "breakage, sparse": ("break", False),
}
EFFECTS = (0.0, -0.5, -1.0, -2.0, 1.0)  # true change of the mean, in bands
SIZES = (20, 50, 100, 300)
SMALL = (12, 25, 50)  # the suite sizes of the drop blocked 95% of the time
LADDER = (0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -5.0, -6.0, -8.0, -10.0, -12.0, -16.0)
RELATIVE_BAND = 0.05  # the default tolerance
STAMP = "2026-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class Shape:
    name: str
    suite: str
    kind: str  # tweak, swap, break
    baseline: np.ndarray
    run: np.ndarray
    lost: tuple[int, ...] = ()  # the pairs a breakage shape broke

    @property
    def band(self) -> float:
        return RELATIVE_BAND * float(self.baseline.mean())

    @property
    def broken(self) -> np.ndarray:
        """Which pairs a breakage shape broke (the baseline answered well, the run lost it)."""
        mask = np.zeros(len(self.run), dtype=bool)
        mask[list(self.lost)] = True
        return mask


def load_shapes(path: Path = SHAPES) -> list[Shape]:
    data = json.loads(path.read_text())
    return [
        Shape(
            s["name"],
            s["suite"],
            s["kind"],
            np.array(s["baseline"]),
            np.array(s["run"]),
            tuple(s["broken"]),
        )
        for s in data["shapes"]
    ]


def _tilt(d: np.ndarray, target: float) -> np.ndarray | None:
    """Weights proportional to exp(theta d) whose weighted mean of d is `target`; None when no
    reweighting of these differences reaches it (target outside (min d, max d))."""

    def weights(theta: float) -> np.ndarray:
        x = theta * d
        w = np.exp(x - x.max())
        return w / w.sum()

    def gap(theta: float) -> float:
        return float(weights(theta) @ d - target)

    if not d.min() < target < d.max():
        return None
    return weights(optimize.brentq(gap, -1e5, 1e5, xtol=1e-10))


def moved(shape: Shape, effect: float, how: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(baseline, run, weights) of the shape moved to a true mean difference of effect x band."""
    a, b = shape.baseline, shape.run
    target = effect * shape.band
    if how == "shift":
        return a, b + (target - float((b - a).mean())), np.full(len(a), 1 / len(a))
    w = _tilt(b - a, target)
    if w is None:
        raise ValueError(f"{shape.name}: no tilt of its differences has mean {target:+.4f}")
    return a, b, w


def suites(
    shape: Shape, effect: float, n: int, worlds: int, *, how: str, stratified: bool, seed: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """`worlds` suites of n (baseline, run) pairs drawn from the moved shape."""
    a, b, w = moved(shape, effect, how)
    rng = np.random.default_rng(seed)
    broken = shape.broken
    for _ in range(worlds):
        if stratified and broken.any():
            k = max(1, round(broken.mean() * n))
            whole = np.flatnonzero(~broken)
            pick = np.concatenate(
                [
                    rng.choice(np.flatnonzero(broken), k, p=_norm(w[broken])),
                    rng.choice(whole, n - k, p=_norm(w[~broken])),
                ]
            )
        else:
            pick = rng.choice(len(a), n, p=w)
        yield np.round(a[pick], 6), np.round(b[pick], 6)


def _norm(w: np.ndarray) -> np.ndarray:
    return w / w.sum()


def _summary(cls: type, values: np.ndarray, **fields: object) -> RunSummary | Baseline:
    per_query = {f"q{i:04d}": {"nDCG@10": float(v)} for i, v in enumerate(values)}
    return cls(
        dataset="world",
        split="test",
        system="sys",
        fingerprint="f",
        measures={"nDCG@10": float(values.mean())},
        per_query=per_query,
        n_queries=len(values),
        **fields,
    )


def verdict(a: np.ndarray, b: np.ndarray, rules: GateRules) -> Verdict:
    """The shipped gate's verdict on one suite: the run's values b against the baseline's a."""
    baseline = _summary(Baseline, a, recorded_at=STAMP, source_run_id="base")
    run = _summary(RunSummary, b, run_id="run", created_at=STAMP)
    policy = GatePolicy(datasets={"default": rules})
    return decide([run], {("world", "sys"): baseline}, policy)


def policy_rules(*, inconclusive: str = "block", resamples: int = 1000) -> GateRules:
    """The default policy's rules, with the statistics' resamples lowered for the simulation
    (they set the interval's Monte Carlo noise, not its width) and `inconclusive` as given."""
    stats = Statistics(inconclusive=inconclusive, resamples=resamples)
    return GateRules(statistics=stats)


def outcome(v: Verdict) -> dict[str, bool]:
    """What decided: the verdict, the baseline check's outcome, and which checks blocked."""
    base = next(c for c in v.checks if c.kind == "baseline")
    blocked_by = {c.kind for c in v.checks if c.blocking and not c.passed}
    return {
        "pass": v.passed,
        "fail": base.blocking and not base.passed and not base.inconclusive,
        "inconclusive": bool(base.inconclusive),
        **{f"by {kind}": True for kind in blocked_by},
    }


def simulate(
    shapes: list[Shape],
    effect: float,
    n: int,
    worlds: int,
    *,
    rules: GateRules,
    how: str = "shift",
    stratified: bool = True,
    seed: int = 0,
) -> dict[str, float]:
    """Shares over `worlds` suites, split evenly over the shapes: PASS, FAIL (the measure's
    drop established), INCONCLUSIVE, blocked, and the share blocked by each check kind
    (`by breakage`, `by spike`, ...). Each shape draws from its own seeded stream, so a run
    with fewer worlds decides the first suites of a longer one. Under `tilt` a shape whose
    differences cannot average the target is left out (`worlds` 0 when none can)."""
    if how == "tilt":  # a shape whose differences cannot average the target has no tilted world
        shapes = [s for s in shapes if _tilt(s.run - s.baseline, effect * s.band) is not None]
    if not shapes:
        return {"worlds": 0}
    counts: dict[str, float] = {}
    per_shape = max(1, worlds // len(shapes))
    total = 0
    for j, shape in enumerate(shapes):
        draws = suites(
            shape, effect, n, per_shape, how=how, stratified=stratified, seed=seed * 1000 + j
        )
        for a, b in draws:
            for key, hit in outcome(verdict(a, b, rules)).items():
                counts[key] = counts.get(key, 0) + hit
            total += 1
    shares = {k: v / total for k, v in counts.items()}
    shares["blocked"] = 1 - shares.get("pass", 0.0)
    shares["worlds"] = total
    return shares


def kind(shapes: list[Shape], name: str) -> tuple[list[Shape], bool]:
    """The shapes of a table row's kind, and whether its suites are stratified."""
    wanted, stratified = KINDS[name]
    return [s for s in shapes if s.kind == wanted], stratified


def cell(
    shapes: list[Shape], name: str, effect: float, n: int, worlds: int, **kw: object
) -> dict[str, float]:
    """One row of the table: kind `name` at a true change of effect x band on n queries
    (seeded by n, so every effect of a size draws the same suites before the move)."""
    chosen, stratified = kind(shapes, name)
    return simulate(chosen, effect, n, worlds, stratified=stratified, seed=n, **kw)


def blocked_drop(
    shapes: list[Shape], name: str, n: int, worlds: int, *, share: float = 0.95, **kw: object
) -> float | None:
    """The smallest true drop on LADDER (in bands) blocked at least `share` of the time on n
    queries, and every larger one on it; None when none is."""
    found = None
    for effect in reversed(LADDER):
        r = cell(shapes, name, effect, n, worlds, **kw)
        if not r["worlds"]:  # no tilt of any shape reaches this drop
            continue
        if r["blocked"] < share:
            break
        found = effect
    return found


SETTINGS = {"block": "default (`inconclusive: block`)", "block_likely": "`block_likely`"}


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _drop(effect: float | None) -> str:
    if effect is None:
        return f"none up to {-LADDER[-1] * RELATIVE_BAND:.0%}"
    if effect == 0:
        return "any (and no change)"
    return f"{-effect * RELATIVE_BAND:.1%}"


def print_tables(worlds: int, *, how: str = "shift", resamples: int = 1000) -> None:
    """The real-shape tables of docs/gate.md: per kind, true change and size, the default
    policy's outcomes beside `block_likely`'s PASS (the same suites: the measure's outcome and
    the guard are the same under both, only what an inconclusive measure does differs); then
    the harmless-change PASS rate and the drop blocked 95% of the time on small suites."""
    shapes = load_shapes()
    rules = {s: policy_rules(inconclusive=s, resamples=resamples) for s in SETTINGS}
    print(f"\n{worlds} suites per row, move {how}:\n")
    columns = ["PASS", "FAIL", "INCONCLUSIVE", "blocked", "by breakage", "`block_likely` PASS"]
    print("| kind | true change | n | " + " | ".join(columns) + " |")
    print("| --- " * (len(columns) + 3) + "|")
    for name in KINDS:
        for effect in EFFECTS:
            for n in SIZES:
                r = cell(shapes, name, effect, n, worlds, rules=rules["block"], how=how)
                likely = cell(shapes, name, effect, n, worlds, rules=rules["block_likely"], how=how)
                change = "0" if effect == 0 else f"{effect:+g} x band"
                keys = ("pass", "fail", "inconclusive", "blocked", "by breakage")
                values = [_pct(r.get(k, 0.0)) for k in keys] + [_pct(likely.get("pass", 0.0))]
                if not r["worlds"]:  # no tilt of any shape of the kind reaches this change
                    values = ["–"] * len(values)
                print(f"| {name} | {change} | {n} | {' | '.join(values)} |", flush=True)
    print(f"\nHarmless change PASS, and the drop blocked 95% of the time ({worlds} suites):\n")
    heads = " | ".join(f"{label}: PASS at 0 | blocks 95% from" for label in SETTINGS.values())
    print(f"| kind | n | {heads} |")
    print("| --- " * (2 + 2 * len(SETTINGS)) + "|")
    for name in ("tweak", "swap"):
        for n in SMALL:
            cells = []
            for setting in SETTINGS:
                harmless = cell(shapes, name, 0.0, n, worlds, rules=rules[setting], how=how)
                drop = blocked_drop(shapes, name, n, worlds, rules=rules[setting], how=how)
                cells += [_pct(harmless["pass"]), _drop(drop)]
            print(f"| {name} | {n} | " + " | ".join(cells) + " |", flush=True)


def print_worst(worlds: int, *, how: str = "shift", resamples: int = 1000) -> None:
    """False PASS of each shape alone at a true drop of the band, under the default policy."""
    rules = policy_rules(resamples=resamples)
    print(f"\nPer shape, PASS at -1 x band ({worlds} suites per cell, move {how}):\n")
    print("| shape | kind | " + " | ".join(f"n={n}" for n in SIZES) + " |")
    print("| --- " * (2 + len(SIZES)) + "|")
    for shape in load_shapes():
        stratified = shape.kind == "break"
        row = [
            simulate([shape], -1.0, n, worlds, rules=rules, how=how, stratified=stratified, seed=n)
            for n in SIZES
        ]
        cells = " | ".join(_pct(r.get("pass", 0.0)) for r in row)
        print(f"| {shape.name} | {shape.kind} | {cells} |", flush=True)
