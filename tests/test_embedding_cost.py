"""What embedding costs (core.retrieval.embedding_cost): the fixed + per-token fit, the record
beside the cache, the calibration on a sample and the ETA against a clock only the encoder
moves (no timed assertions: the clock is the test's)."""

import json

import numpy as np
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval import embedding_cost, embeddings
from rageval_pipeline.core.retrieval.embedding_cost import Cost, Fit, plan
from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache, calibrate, embed
from tests.test_embedding_cache import CountingEncoder

FIXED, PER_TOKEN = 0.5, 0.01


@pytest.fixture
def clock(monkeypatch):
    """A clock only `timed` encoders move."""
    now = [0.0]
    monkeypatch.setattr(embeddings.time, "perf_counter", lambda: now[0])
    return now


def timed(clock, fixed=FIXED, per_token=PER_TOKEN, warm_up=10.0):
    """An encoder whose call costs `fixed` + `per_token` a character (lengths: characters),
    its first call `warm_up` more."""
    calls = []

    def encode(batch: list[str]) -> np.ndarray:
        clock[0] += fixed + per_token * sum(map(len, batch)) + (0.0 if calls else warm_up)
        calls.append(len(batch))
        return CountingEncoder()(batch)

    return encode


def texts_of_many_lengths() -> list[str]:
    return [("x" * n) + str(i) for n in range(5, 80, 3) for i in range(1 + n % 4)]


def test_the_fit_recovers_fixed_and_per_token_costs_leaving_out_the_warm_up():
    fit = Fit()
    fit.add(4, 50, 30.0)  # the warm-up: left out
    for rows, size in [(4, 50), (1, 10), (3, 7), (2, 90), (1, 1)]:
        fit.add(rows, size, FIXED + PER_TOKEN * rows * size)
    for recent in (True, False):
        fixed, per_token, determinate = fit.costs(recent=recent)
        assert (
            determinate and fixed == pytest.approx(FIXED) and per_token == pytest.approx(PER_TOKEN)
        )
    # Calls of one size only: not determinate, the time taken as all per token.
    same = Fit()
    for _ in range(3):
        same.add(2, 10, 4.0)
    assert same.costs() == (0.0, pytest.approx(0.2), False)


def test_a_plan_costs_a_fixed_cost_a_call_plus_its_tokens():
    cost = Cost(fixed_s=FIXED, per_token_s=PER_TOKEN, tokens_per_char=0.25)
    # Longest first, runs of one length cut at 2 rows: (2, 9), (1, 9), (1, 4), (2, 1).
    calls = plan([1, 9, 4, 9, 1, 9], 2)
    assert calls == [(2, 9), (1, 9), (1, 4), (2, 1)]
    assert cost.seconds(calls) == pytest.approx(4 * FIXED + PER_TOKEN * (18 + 9 + 4 + 2))
    # Without a tokenizer: characters x tokens a character, truncated as the model truncates.
    lengths = embedding_cost.approximate_lengths(["a" * 40, "b" * 4000, ""], cost, 256)
    assert lengths == [10, 256, 1]


def test_calibration_measures_the_cost_on_a_sample_and_keeps_its_vectors(tmp_path, clock):
    texts = texts_of_many_lengths()
    cache = EmbeddingCache(tmp_path, "m")
    calibration = calibrate(texts, cache, timed(clock), rows_per_call=4, calls=5)
    assert calibration.cost.fixed_s == pytest.approx(FIXED)
    assert calibration.cost.per_token_s == pytest.approx(PER_TOKEN)
    assert calibration.cost.tokens_per_char == 1.0  # lengths in characters
    assert 5 < calibration.embedded < len(texts)
    assert calibration.seconds == pytest.approx(clock[0])
    # Recorded beside the cache, for the next estimate.
    assert cache.cost().cost == calibration.cost
    # The sample is cached: the embedding after it computes the rest, in the time estimated.
    rest = calibration.lengths
    assert len(rest) == len(texts) - calibration.embedded
    encoder, before = timed(clock, warm_up=0.0), clock[0]
    vectors, stats = embed(texts, cache, encoder, rows_per_call=4)
    assert stats.embedded == len(rest)
    assert clock[0] - before == pytest.approx(
        calibration.cost.seconds(plan(list(rest.values()), 4))
    )
    assert np.array_equal(
        vectors, embed(texts, EmbeddingCache(tmp_path, "fresh"), CountingEncoder())[0]
    )


def test_a_recorded_cost_is_scaled_to_the_speed_measured_now(tmp_path, clock):
    cache = EmbeddingCache(tmp_path, "m")
    recorded = Cost(fixed_s=FIXED, per_token_s=PER_TOKEN, tokens_per_char=1.0)
    embedding_cost.record(cache.directory, recorded)
    texts = texts_of_many_lengths()
    # The machine is three times slower now: the calibration says so, with the recorded shape.
    slow = timed(clock, fixed=3 * FIXED, per_token=3 * PER_TOKEN)
    calibration = calibrate(texts, cache, slow, rows_per_call=4, calls=3)
    assert calibration.cost.fixed_s == pytest.approx(3 * FIXED)
    assert calibration.cost.per_token_s == pytest.approx(3 * PER_TOKEN)


def test_the_eta_runs_at_the_recorded_cost_scaled_to_the_speed_of_the_calls_so_far(tmp_path, clock):
    cache = EmbeddingCache(tmp_path, "m")
    embedding_cost.record(
        cache.directory, Cost(fixed_s=FIXED, per_token_s=PER_TOKEN, tokens_per_char=1.0)
    )
    reports: list[embeddings.Progress] = []
    encoder = timed(clock, fixed=2 * FIXED, per_token=2 * PER_TOKEN)
    embed(
        texts_of_many_lengths(),
        cache,
        encoder,
        progress=reports.append,
        progress_every_s=0.0,
        rows_per_call=4,
    )
    end = reports[-1].seconds
    # From the second call on (the first pays the warm-up), every ETA is exact, calls of one
    # size so far or not; an own fit would need calls of two sizes.
    for report in reports[2:]:
        assert report.eta_seconds == pytest.approx(end - report.seconds)


def test_the_eta_speed_forgets_by_half_life_and_bounds_a_stalled_call():
    # The prior: 1 s a call. After the warm-up, a call at the prior's speed, then one stalled
    # for HALF_LIFE_S seconds: it counts as SPIKE x its due at the speed so far (2 x 1 s), and
    # the call before it weighs half, so the speed is (0.5 x 1 + 2) / (0.5 x 1 + 1) times the
    # prior's; the record weighs all alike, unbounded: (1 + H) / 2.
    half, spike = embedding_cost.HALF_LIFE_S, embedding_cost.SPIKE
    assert (half, spike) == (10.0, 2.0)
    fit = Fit(Cost(fixed_s=1.0, per_token_s=0.0, tokens_per_char=1.0))
    for seconds in (30.0, 1.0, half):  # the warm-up first: left out
        fit.add(1, 5, seconds)
    assert fit.scaled().fixed_s == pytest.approx((0.5 + spike) / 1.5)
    assert fit.scaled(recent=False).fixed_s == pytest.approx((1 + half) / 2)
    # A slower phase (3 s a call) shows: the bound rises with the speed; after 18 half-lives
    # the calls before it have faded.
    for _ in range(60):
        fit.add(1, 5, 3.0)
    assert fit.scaled().fixed_s == pytest.approx(3.0, rel=1e-3)
    # The own fit (no prior) forgets alike: two sizes, exact costs, any weights recover them.
    own = Fit()
    for rows, size in [(1, 1), (2, 50), (1, 10), (3, 7), (2, 90)]:
        own.add(rows, size, FIXED + PER_TOKEN * rows * size)
    assert own.costs()[:2] == (pytest.approx(FIXED), pytest.approx(PER_TOKEN))


def test_an_embedding_of_many_calls_records_its_cost_a_small_one_does_not(tmp_path, clock):
    texts = texts_of_many_lengths()
    few, many = EmbeddingCache(tmp_path, "few"), EmbeddingCache(tmp_path, "many")
    embed(texts[:4], few, timed(clock), rows_per_call=1)  # 4 calls: too few to fit
    assert few.cost() is None
    embed(texts, many, timed(clock), rows_per_call=4)
    recorded = many.cost()
    assert recorded.cost.fixed_s == pytest.approx(FIXED)
    assert recorded.cost.per_token_s == pytest.approx(PER_TOKEN)
    assert recorded.recorded_at > 0 and recorded.load_average >= 0


def test_rate_file_round_trip_and_refusals(tmp_path):
    cost = Cost(fixed_s=0.01, per_token_s=4e-5, tokens_per_char=0.26)
    embedding_cost.record(tmp_path, cost)
    assert embedding_cost.read(tmp_path).cost == cost
    path = tmp_path / embedding_cost.RATE_FILE
    # What an earlier version recorded (texts a second, blind to lengths): as if none.
    path.write_text(json.dumps({"docs_per_s": 5.0}))
    assert embedding_cost.read(tmp_path) is None
    good = json.loads(
        embedding_cost.Recorded(cost=cost, recorded_at=1.0, load_average=0.5).model_dump_json()
    )
    cases = {
        "{not json": "not JSON",
        json.dumps({**good, "cost": {**good["cost"], "fixed_s": -1.0}}): "cost.fixed_s",
        json.dumps({**good, "cost": {**good["cost"], "per_token_s": "fast"}}): "cost.per_token_s",
        json.dumps({**good, "extra": 1}): "extra",
        json.dumps({"docs_per_s": 5.0, "more": 1}): "cost",
        json.dumps([1, 2]): "",
    }
    for text, named in cases.items():
        path.write_text(text)
        with pytest.raises(InputError) as refused:
            embedding_cost.read(tmp_path)
        line = str(refused.value)
        assert line.startswith(str(path)) and named in line and "\n" not in line
        assert "delete it, the next embedding records it" in line
