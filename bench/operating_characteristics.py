"""Issue 32: the gate's per-measure decision, its error rates measured over simulated worlds.

Each world is a suite of n queries with paired nDCG@10-like per-query values: the baseline's
from a Beta(0.6, 0.9) distribution (mean 0.4, SD 0.33, many queries near 0 as in nfcorpus), the
run's from the same marginal correlated at `rho` through a Gaussian copula, then moved so that
the population mean changes by exactly `effect` x the band: a drop scales every value by
(1 - r), a gain scales the distance to 1, so values stay in [0, 1]. The band is the default
policy's 5% of the baseline mean. Each world is decided by the shipped functions,
`core.gate.decision.tests` and `judge`, under the default policy's statistics (the bootstrap's
resamples lowered to keep the run short: it sets the interval's Monte Carlo noise, not its width).

Under the PPI rule each world is a population of N = 10 n queries with those values (the human
qrels' nDCG@10) and an LLM judge's for both systems: offset + scale x human + a bias of its own
per system + noise shared by the query + noise per system and query, clipped to [0, 1] (JUDGE).
The judge favours the run by a whole band, so its labels alone would pass a true drop of the
band. n queries are drawn for human judging by the shipped `sampling.draw_sample` (the frame's
committed seed) and the world is decided by the gate's own PPI path, `ppi_rule.paired_ppi`
(ppi_py's PPI++ on the paired differences), then `judge`.

    PYTHONPATH=$PWD nice .venv/bin/python bench/operating_characteristics.py [--worlds 1000] \
        [--rule interval|ppi]

With `--real shift|tilt` the worlds are resampled from real paired per-query differences
instead, and decided by the whole shipped verdict (bench/real_worlds.py); `--per-shape` prints
each real shape alone at a true drop of the band.

Then one suite that resolves the band (closer systems on 1,000 queries), with no true change.

False PASS: PASS while the true drop is at or beyond the band; false FAIL: FAIL while it is
within; blocked: FAIL, or INCONCLUSIVE under `statistics.inconclusive: block` (the default).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats as sps

from bench import real_worlds
from rageval_pipeline.core.gate.decision import Statistics, judge, resolution, tests
from rageval_pipeline.core.gate.ppi_rule import paired_ppi
from rageval_pipeline.core.statistics.paired import PairedTest
from rageval_pipeline.core.statistics.sampling import draw_sample

SHAPE = (0.6, 0.9)  # Beta(a, b): the per-query nDCG@10 of the baseline
MEAN = SHAPE[0] / sum(SHAPE)
BAND = 0.05 * MEAN  # the default tolerance: 5% of the baseline
EFFECTS = (0.0, -1.0, -2.0, 1.0)  # true change of the mean, in bands
SIZES = (20, 50, 300)
RHO = 0.85  # per-query correlation of run and baseline (the copula's; bm25 vs hybrid ~0.9)
# A suite that resolves the band: closer systems (0.95) on 1,000 queries.
RESOLVING = {"n": 1000, "rho": 0.95}
LLM_PER_HUMAN = 10  # the PPI population: N = 10 n LLM-judged queries, n of them human-judged
# The LLM judge's nDCG@10 from the human one: it compresses the scale, overrates both systems and
# the run by one band more than the baseline; its per-query noise is partly shared by the two
# systems (the same query misread), partly its own (their different documents misjudged).
JUDGE = {"offset": 0.1, "scale": 0.8, "bias": (0.03, 0.03 + BAND), "query": 0.1, "own": 0.08}


def world(rng: np.random.Generator, n: int, effect: float, rho: float) -> tuple[np.ndarray, ...]:
    """(baseline, run) per-query values of one suite whose run moves the mean by effect x BAND."""
    u = rng.standard_normal(n)
    v = rho * u + np.sqrt(1 - rho**2) * rng.standard_normal(n)
    a = sps.beta.ppf(sps.norm.cdf(u), *SHAPE)
    b = sps.beta.ppf(sps.norm.cdf(v), *SHAPE)
    r = effect * BAND / MEAN  # relative change of the mean
    b = b * (1 + r) if r <= 0 else 1 - (1 - b) * (1 - r * MEAN / (1 - MEAN))
    return a, b


def judged(rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """The LLM judge's per-query values for (baseline, run) whose human values are (a, b)."""
    shared = JUDGE["query"] * rng.standard_normal(len(a))
    return tuple(
        np.clip(
            JUDGE["offset"]
            + JUDGE["scale"] * x
            + bias
            + shared
            + JUDGE["own"] * rng.standard_normal(len(x)),
            0.0,
            1.0,
        )
        for x, bias in zip((a, b), JUDGE["bias"], strict=True)
    )


def ppi_test(
    rng: np.random.Generator, n: int, effect: float, rho: float, stats: Statistics, i: int
) -> PairedTest:
    """World i under the PPI rule: the gate's PPI++ PairedTest of nDCG@10 from n human-judged
    queries drawn from N = LLM_PER_HUMAN x n LLM-judged ones."""
    a, b = world(rng, LLM_PER_HUMAN * n, effect, rho)
    llm = judged(rng, a, b)
    frame = [f"w{i}q{j}" for j in range(len(a))]  # a fresh population, so a fresh draw
    sample = draw_sample(frame, n)
    drawn = set(sample.drawn())
    human = tuple(
        {q: {"nDCG@10": float(v)} for q, v in zip(frame, x, strict=True) if q in drawn}
        for x in (a, b)
    )
    per_query = tuple(
        {q: {"nDCG@10": float(v)} for q, v in zip(frame, x, strict=True)} for x in llm
    )
    return paired_ppi(human, per_query, sample, ["nDCG@10"], stats, where=None)["nDCG@10"]


def simulate(
    effect: float,
    n: int,
    worlds: int,
    *,
    seed: int = 0,
    rho: float = RHO,
    resamples: int = 1000,
    rule: str = "interval",
) -> dict[str, float]:
    """Shares of PASS, FAIL, INCONCLUSIVE and blocked over `worlds` suites, and of suites that
    resolve the band, with the PASS share among those; under `ppi` also the mean effective n
    per human-judged query."""
    stats = Statistics(rule=rule, resamples=resamples)
    rng = np.random.default_rng(seed)
    outcomes, resolved, resolved_pass, gain = [], 0, 0, []
    for i in range(worlds):
        if rule == "ppi":
            test = ppi_test(rng, n, effect, rho, stats, i)
            gain.append((test.effective_n or 0.0) / n)
        else:
            a, b = world(rng, n, effect, rho)
            test = tests({"nDCG@10": (a, b)}, stats.model_copy(update={"seed": i}))["nDCG@10"]
        judgement = judge(True, test.delta, test, BAND, stats)
        outcomes.append(judgement)
        res = resolution(test, BAND, stats)
        if res is not None and res.resolves:
            resolved += 1
            resolved_pass += judgement.outcome == "pass"
    share = {k: sum(j.outcome == k for j in outcomes) / worlds for k in ("pass", "fail")}
    return {
        **share,
        "inconclusive": 1 - share["pass"] - share["fail"],
        "blocked": sum(j.blocks for j in outcomes) / worlds,
        "resolved": resolved / worlds,
        "pass_if_resolved": resolved_pass / resolved if resolved else float("nan"),
        "effective_n_per_human": float(np.mean(gain)) if gain else float("nan"),
    }


def _share(x: float) -> str:
    return "–" if np.isnan(x) else f"{x:.1%}"


def size(n: int, rule: str) -> str:
    """A row's suite size: the human-judged queries, and under PPI the LLM-judged population."""
    return f"{n} of {LLM_PER_HUMAN * n}" if rule == "ppi" else str(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=1000)
    parser.add_argument("--rho", type=float, default=RHO)
    parser.add_argument("--rule", choices=("interval", "ppi"), default="interval")
    parser.add_argument(
        "--real",
        choices=("shift", "tilt"),
        help="worlds resampled from real paired differences (bench/real_worlds.py), moved so",
    )
    parser.add_argument("--per-shape", action="store_true", help="with --real: each shape alone")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.real:
        show = real_worlds.print_worst if args.per_shape else real_worlds.print_tables
        show(args.worlds, how=args.real)
        print(f"({time.perf_counter() - started:.0f} s)")
        return
    print(f"band {BAND:.4f} (5% of the mean {MEAN:.3f}), rho {args.rho}, {args.worlds} worlds")
    columns = ["PASS", "FAIL", "INCONCLUSIVE", "blocked", "resolves", "PASS if resolved"]
    if args.rule == "ppi":
        columns.append("effective n / n")
    print("| true change | n | " + " | ".join(columns) + " |")
    print("| --- " * (len(columns) + 2) + "|")
    for effect in EFFECTS:
        for n in SIZES:
            r = simulate(effect, n, args.worlds, seed=n, rho=args.rho, rule=args.rule)
            name = "0" if effect == 0 else f"{effect:+g} x band"
            cells = [r[k] for k in ("pass", "fail", "inconclusive", "blocked", "resolved")]
            extra = f" {r['effective_n_per_human']:.2f} |" if args.rule == "ppi" else ""
            print(
                f"| {name} | {size(n, args.rule)} | "
                + " | ".join(f"{x:.1%}" for x in cells)
                + f" | {_share(r['pass_if_resolved'])} |{extra}",
                flush=True,
            )
    if args.rule == "interval":
        worlds = max(args.worlds // 5, 1)
        r = simulate(0.0, RESOLVING["n"], worlds, seed=1, rho=RESOLVING["rho"])
        print(
            f"\nA suite resolving the band (rho {RESOLVING['rho']}, n {RESOLVING['n']}, {worlds} "
            f"worlds, no true change): resolves {r['resolved']:.1%}, PASS {r['pass']:.1%}, "
            f"FAIL {r['fail']:.1%}, PASS if resolved {_share(r['pass_if_resolved'])}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
