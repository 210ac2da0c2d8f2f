"""PPI++ means and paired deltas: the estimator against its closed form and ppi_py, the
recorded human sample, and a simulation with known truth (issue 26)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.statistics.paired import minimum_detectable_effect
from rageval_pipeline.core.statistics.ppi import nested, ppi_deltas, ppi_mean, ppi_means
from rageval_pipeline.core.statistics.sampling import (
    HumanSample,
    check_sample,
    committed_seed,
    draw_sample,
    load_sample,
)

Z95 = 1.959963984540054


def _judged(n: int, others: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.random(n + others)
    llm = np.clip(truth + rng.normal(0.1, 0.15, n + others), 0, 1)  # biased, noisy judge
    return truth[:n], llm[:n], llm[n:]


@pytest.mark.parametrize(("n", "others", "seed"), [(30, 300, 1), (100, 900, 2), (60, 60, 3)])
def test_estimate_and_interval_are_the_power_tuned_closed_form_and_ppi_pys(n, others, seed):
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # with sklearn: not at collection

    y, yhat, unlabeled = _judged(n, others, seed)
    ours = ppi_mean(y, yhat, unlabeled)
    # PPI++ for a mean (Angelopoulos, Duchi & Zrnic 2023, eq. for lam*): written out here.
    everything = np.concatenate([yhat, unlabeled])
    lam = np.clip(
        np.cov(y, yhat, bias=True)[0, 1] / ((1 + n / others) * everything.var(ddof=1)), 0, 1
    )
    estimate = lam * unlabeled.mean() + (y - lam * yhat).mean()
    se = np.sqrt((lam * unlabeled).var() / others + (y - lam * yhat).var() / n)
    assert ours.estimate == pytest.approx(estimate, abs=1e-9)
    assert (ours.ci_low, ours.ci_high) == pytest.approx(
        (estimate - Z95 * se, estimate + Z95 * se), abs=1e-9
    )
    low, high = ppi_mean_ci(y, yhat, unlabeled, alpha=0.05)
    assert ours.estimate == pytest.approx(ppi_mean_pointestimate(y, yhat, unlabeled)[0], abs=1e-9)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((low[0], high[0]), abs=1e-9)
    assert (ours.n_human, ours.n_llm) == (n, n + others)


def test_effective_size_and_mde_follow_the_ratio_of_standard_errors():
    y, yhat, unlabeled = _judged(80, 800, 4)
    ours = ppi_mean(y, yhat, unlabeled, power=0.8)
    assert ours.mde_human == pytest.approx(minimum_detectable_effect(np.std(y, ddof=1), 80))
    human_width = ours.human_ci_high - ours.human_ci_low
    width = ours.ci_high - ours.ci_low
    assert ours.effective_n == pytest.approx(80 * (human_width / width) ** 2)
    assert ours.mde == pytest.approx(ours.mde_human * width / human_width)
    assert ours.effective_n > 80 and ours.mde < ours.mde_human  # a good judge helps
    assert ours.p_value == pytest.approx(
        2 * stats.norm.sf(abs(ours.estimate) / (width / (2 * Z95))), rel=1e-9
    )


def test_a_constant_judge_leaves_the_human_mean():
    y, _, _ = _judged(40, 400, 5)
    ours = ppi_mean(y, np.ones(40), np.ones(400))
    assert ours.estimate == pytest.approx(y.mean(), abs=1e-12)
    assert (ours.ci_low, ours.ci_high) == pytest.approx(
        (ours.human_ci_low, ours.human_ci_high), abs=1e-12
    )


def _table(values: dict[str, float], measure: str = "nDCG@10") -> dict[str, dict[str, float]]:
    """Per-query values as the measures give them, rows shuffled: aligned by query id."""
    rows = [(q, measure, v) for q, v in values.items()]
    frame = pd.DataFrame(rows, columns=["query_id", "measure", "value"])
    return nested(frame.sample(frac=1, random_state=0))


def test_tables_are_aligned_by_query_id_and_a_query_the_judge_found_nothing_for_scores_zero():
    frame = [f"q{i:03d}" for i in range(200)]
    sample = draw_sample(frame, 40)
    drawn = sample.drawn()
    others = sorted(set(frame) - set(drawn))
    rng = np.random.default_rng(6)
    truth = dict(zip(frame, rng.random(200), strict=True))
    llm = {q: min(1.0, v + 0.1) for q, v in truth.items() if q != others[0]}  # nothing relevant
    human = {q: truth[q] for q in drawn}
    ours = ppi_means(_table(human), _table(llm), sample, ["nDCG@10"])["nDCG@10"]
    y = np.array([truth[q] for q in drawn])
    unlabelled = np.array([llm.get(q, 0.0) for q in others])
    direct = ppi_mean(y, np.array([llm[q] for q in drawn]), unlabelled)
    assert ours == direct
    llm[others[0]] = 0.0

    # A drawn query without a human value is refused in one line, never scored 0.
    without = {q: v for q, v in human.items() if q != drawn[0]}
    refusal = f"^h.tsv: 1 drawn query has no human-judged nDCG@10 .first: {drawn[0]};"
    with pytest.raises(InputError, match=refusal):
        ppi_means(_table(without), _table(llm), sample, ["nDCG@10"], where="h.tsv")

    b_human = {q: v * 0.9 for q, v in human.items()}
    b_llm = {q: v * 0.9 for q, v in llm.items()}
    delta = ppi_deltas(
        (_table(human), _table(b_human)), (_table(llm), _table(b_llm)), sample, ["nDCG@10"]
    )["nDCG@10"]
    expected = ppi_mean(
        -0.1 * y,
        -0.1 * np.array([llm[q] for q in drawn]),
        -0.1 * np.array([llm[q] for q in others]),
    )
    assert delta.estimate == pytest.approx(expected.estimate, abs=1e-12)
    assert delta.ci_high < 0


# ---------------------------------------------------------------------------- the recorded draw


def test_the_draw_depends_on_the_frame_alone_not_its_order():
    frame = [f"q{i}" for i in range(50)]
    one = draw_sample(frame, 10)
    assert one.seed == committed_seed(frame) == draw_sample(frame[::-1], 10).seed
    assert one.drawn() == HumanSample(seed=one.seed, size=10, frame=frame[::-1]).drawn()
    assert one.drawn() != draw_sample([*frame, "q50"], 10).drawn()
    assert len(set(one.drawn())) == 10 and set(one.drawn()) <= set(frame)


def test_a_seed_shopped_sample_is_refused():
    """The best of 20 seeded draws (the sample whose human values look best) is never the
    frame's committed draw: its record is refused, so is its seed written as a string."""
    frame = [f"q{i:03d}" for i in range(300)]
    value = dict(zip(frame, np.random.default_rng(1).random(300), strict=True))

    def draw(seed: int) -> list[str]:
        picks = np.random.default_rng(seed).choice(300, 40, replace=False)
        return sorted(frame[i] for i in picks)

    best = max(range(20), key=lambda seed: np.mean([value[q] for q in draw(seed)]))
    with pytest.raises(ValueError, match="is not the seed this frame commits to"):
        HumanSample(seed=best, size=40, frame=frame)
    committed = draw_sample(frame, 40)
    record = json.loads(committed.model_dump_json())
    with pytest.raises(ValueError, match="valid integer"):
        HumanSample.model_validate(record | {"seed": str(committed.seed)})
    assert HumanSample.model_validate(record) == committed


def test_a_hand_picked_human_subset_is_refused_in_one_line():
    frame = [f"q{i}" for i in range(50)]
    sample = draw_sample(frame, 10)
    drawn = set(sample.drawn())
    check_sample(sample, drawn, set(frame), where="h.tsv", llm_where="l.tsv")
    picked = set(frame[:10])
    with pytest.raises(InputError, match="not the recorded random draw") as caught:
        check_sample(sample, picked, set(frame), where="h.tsv", llm_where="l.tsv")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("h.tsv: ")
    with pytest.raises(InputError, match="no LLM judgment"):
        check_sample(sample, drawn, set(frame[1:]), where="h.tsv", llm_where="l.tsv")


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"seed": 0, "size": 2, "frame": ["a", "b", "a"]}, "frame: lists the query id 'a' more"),
        ({"seed": 0, "size": 2, "frame": ["a", "b"]}, "size: 2 leaves no query of the 2 for PPI"),
        ({"seed": -1, "size": 2, "frame": ["a", "b", "c"]}, "seed: must be greater than"),
        ({"seed": 0, "size": 2, "frame": ["a", "b", "c"]}, "seed: 0 is not the seed this frame"),
        ({"seed": "7", "size": 2, "frame": ["a", "b", "c"]}, "seed: must be a valid integer"),
    ],
)
def test_a_bad_sampling_record_is_one_line_naming_file_and_field(tmp_path, record, expected):
    path = tmp_path / "human.trec.sample.json"
    path.write_text(json.dumps(record))
    with pytest.raises(InputError) as caught:
        load_sample(path)
    assert str(caught.value).startswith(f"{path}:1: ") and expected in str(caught.value)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------- simulation, known truth

QUERIES, DOCS, HUMAN = 1_000, 8, 100
_DISCOUNT = 1 / np.log2(np.arange(2, DOCS + 2))


def _ndcg(grades: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """nDCG@10 of every query at once (linear gains; each query ranks its DOCS <= 10 documents,
    all of them judged, so the ideal ranking is over the same documents)."""
    ranked = np.take_along_axis(grades, np.argsort(-scores, axis=1, kind="stable"), axis=1)
    ideal = (-np.sort(-grades, axis=1) * _DISCOUNT).sum(axis=1)
    return np.divide(
        (ranked * _DISCOUNT).sum(axis=1), ideal, out=np.zeros(QUERIES), where=ideal > 0
    )


def _world(seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per-query nDCG@10 deltas B - A with the true grades and with a biased judge's, and the
    human sample. The judge grades +1 on 30% of non-relevant documents and -1 on 20% of
    relevant ones; B's gain is in ranking marginally relevant (grade 1) documents higher, the
    ones the judge demotes, so the judge's delta is biased."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(4, size=(QUERIES, DOCS), p=[0.5, 0.25, 0.15, 0.10])
    u = rng.random((QUERIES, DOCS))
    llm = truth + ((truth == 0) & (u < 0.3)) - ((truth > 0) & (u >= 0.8))
    a = truth + rng.normal(0, 1.0, truth.shape)
    b = truth + rng.normal(0, 1.0, truth.shape) + 0.8 * (truth == 1)
    frame = [f"q{i:04d}-world{seed}" for i in range(QUERIES)]  # each world its own draw
    drawn = draw_sample(frame, HUMAN).drawn()
    return _ndcg(truth, b) - _ndcg(truth, a), _ndcg(llm, b) - _ndcg(llm, a), drawn


def test_simulation_ppi_covers_the_true_delta_with_narrower_intervals_than_humans_alone():
    covered = naive_covered = 0
    widths, human_widths = [], []
    for seed in range(200):
        true_delta, llm_delta, drawn = _world(seed)
        sampled = np.zeros(QUERIES, dtype=bool)
        sampled[[int(q[1:5]) for q in drawn]] = True
        target = true_delta.mean()  # the population's delta: what the gate wants to know
        est = ppi_mean(true_delta[sampled], llm_delta[sampled], llm_delta[~sampled])
        covered += est.ci_low <= target <= est.ci_high
        widths.append(est.ci_high - est.ci_low)
        human_widths.append(2 * Z95 * true_delta[sampled].std() / np.sqrt(HUMAN))
        # Naive: the judge's labels taken as truth on all 1,000 queries.
        naive_covered += abs(llm_delta.mean() - target) <= Z95 * llm_delta.std() / np.sqrt(QUERIES)
    ratio = np.mean(widths) / np.mean(human_widths)
    print(f"PPI coverage {covered / 200:.3f}, width ratio {ratio:.3f}, naive {naive_covered / 200}")
    assert covered / 200 >= 0.93
    assert ratio <= 0.75
    assert naive_covered / 200 <= 0.5
