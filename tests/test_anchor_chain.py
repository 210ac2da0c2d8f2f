"""`baseline update` never stores a worse baseline silently, and the anchor stops a chain of
small passing losses: lineage, `--accept-worse`, the cumulative band."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rageval_pipeline.cli.baseline import _lineage_lines
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import GatePolicy, RunSummary, decide, load_baseline, load_baselines
from rageval_pipeline.core.gate.baselines import promote, write_baseline
from rageval_pipeline.core.gate.lineage_rule import snapshot

QUERIES = 100
# Each update loses 0.4 of the band (2% of the baseline): within `mean_within` (half the band),
# so every step passes its own baseline and only the anchor's cumulative band can stop the
# chain (a step of half the band sits on `mean_within`'s edge and blocks on its own half of
# the time).
STEP = 0.4


def _run(
    values: np.ndarray, step: int, suite: str = "s1", added: int = 0, digests: bool = True
) -> RunSummary:
    per_query = {f"q{i:03d}": {"nDCG@10": round(float(v), 6)} for i, v in enumerate(values)}
    per_query |= {f"new{i:03d}": {"nDCG@10": 0.5} for i in range(added)}
    mean = float(np.mean([q["nDCG@10"] for q in per_query.values()]))
    return RunSummary(
        dataset="d",
        split="test",
        system="s",
        fingerprint=f"f{step}",
        run_id=f"run-{step}",
        created_at=f"2026-01-{step + 1:02d}T12:00:00+00:00",
        measures={"nDCG@10": mean},
        per_query=per_query,
        n_queries=len(per_query),
        suite=suite,
        query_digests={q: f"d-{q}" for q in per_query} if digests else {},
    )


def _chain(tmp_path, policy: GatePolicy, steps: int = 6) -> tuple[int | None, list]:
    """Record step 0, then try `steps` successive updates each losing STEP x band of the
    first baseline; return the first step the gate blocks (None: none) and its checks."""
    rng = np.random.default_rng(7)
    base = rng.uniform(0.3, 0.9, QUERIES)
    promote([_run(base, 0)], tmp_path, policy)
    for step in range(1, steps + 1):
        values = base * (1 - 0.05 * STEP * step) + rng.normal(0, 0.004, QUERIES)
        run = _run(np.clip(values, 0, 1), step)
        verdict = decide([run], load_baselines(tmp_path), policy)
        if not verdict.passed:
            return step, verdict.failures
        promote([run], tmp_path, policy)
    return None, []


def test_a_chain_of_half_band_losses_is_blocked_by_the_anchor_before_the_fifth(tmp_path):
    blocked, failures = _chain(tmp_path / "anchored", GatePolicy())
    assert blocked is not None and blocked <= 4, blocked
    assert blocked >= 3  # a loss of 1 band from the anchor (2 steps) is within the 2x band
    assert {c.kind for c in failures} == {"anchor"}
    assert "cumulative band (2x)" in failures[0].message
    stored = load_baseline(tmp_path / "anchored" / "d" / "s.json")
    assert stored.anchor is not None and stored.anchor.source_run_id == "run-0"
    assert stored.replaced is not None and stored.replaced.source_run_id == f"run-{blocked - 2}"
    lines = _lineage_lines(stored)
    assert lines[0].startswith("replaces the baseline of 2026-01-")
    assert lines[1].startswith("anchor: the baseline of 2026-01-01") and "(run run-0)" in lines[1]
    # each names the measure that decides (the recorded policy's), the replaced one old -> new
    assert re.search(r"\): nDCG@10 0\.\d{4} -> 0\.\d{4}$", lines[0]), lines[0]
    assert re.search(r"\): nDCG@10 0\.\d{4}$", lines[1]), lines[1]

    # Before: without the anchor's cumulative band (a factor no chain reaches), all six pass.
    loose = GatePolicy.model_validate({"datasets": {"default": {"anchor": {"factor": 100}}}})
    assert _chain(tmp_path / "unanchored", loose) == (None, [])


def test_an_update_beyond_the_band_is_refused_unless_accepted_worse(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.9, QUERIES)
    policy = GatePolicy()
    promote([_run(base, 0, digests=False)], tmp_path, policy)
    # Another suite, and no per-query digests to narrow it by: the gate cannot compare (it
    # blocks, which the update resolves), but the queries both measured show the primary
    # measure's paired loss beyond the band.
    worse = _run(base * 0.6, 1, suite="s2", digests=False)
    with pytest.raises(InputError, match=r"refusing a worse baseline \(nDCG@10 on the 100 "):
        promote([worse], tmp_path, policy)
    assert load_baseline(tmp_path / "d" / "s.json").source_run_id == "run-0"
    with pytest.raises(InputError, match="--accept-worse needs a reason"):
        promote([worse], tmp_path, policy, accept_worse=" ")
    [done] = promote([worse], tmp_path, policy, accept_worse="moved to the new corpus")
    stored = load_baseline(done.path)
    assert stored.accepted_worse == "moved to the new corpus" and "beyond the band" in done.refused
    assert stored.replaced.source_run_id == "run-0"
    # Accepted as worse: the anchor stays on the baseline it replaced.
    assert stored.anchor.source_run_id == "run-0"

    # The older spelling keeps working as the same behaviour.
    again = _run(base * 0.6 * 0.6, 2, suite="s2", digests=False)
    [done] = promote([again], tmp_path, policy, force=True, note="older spelling")
    assert load_baseline(done.path).accepted_worse == "older spelling"


def test_a_better_baseline_becomes_its_own_anchor_and_a_pin_holds(tmp_path):
    rng = np.random.default_rng(5)
    base = rng.uniform(0.3, 0.8, QUERIES)
    policy = GatePolicy()
    promote([_run(base, 0)], tmp_path, policy)
    [slightly_worse] = promote([_run(base * 0.99, 1)], tmp_path, policy)
    assert slightly_worse.baseline.anchor.source_run_id == "run-0"
    [better] = promote([_run(base * 1.05, 2)], tmp_path, policy)
    assert better.baseline.anchor is None  # no worse than the anchor: it is its own
    [pinned] = promote([_run(base * 1.04, 3)], tmp_path, policy, pin_anchor=True)
    assert pinned.baseline.anchor.pinned and pinned.baseline.anchor.source_run_id == "run-3"
    [after] = promote([_run(base * 1.1, 4)], tmp_path, policy)
    assert after.baseline.anchor.source_run_id == "run-3"  # a pinned anchor stays


def test_a_grown_suite_keeps_the_anchor_on_its_unchanged_queries(tmp_path):
    """Growing the suite is no way around the anchor: it is compared on the unchanged queries."""
    rng = np.random.default_rng(9)
    base = rng.uniform(0.3, 0.9, QUERIES)
    policy = GatePolicy()
    promote([_run(base, 0)], tmp_path, policy)
    step = base * 0.975 + rng.normal(0, 0.004, QUERIES)
    promote([_run(step, 1)], tmp_path, policy)  # half a band: within it, anchor kept
    # Another suite version (20 queries added) at -12.5% of the anchor, -10% of the baseline.
    grown = _run(base * 0.875 + rng.normal(0, 0.004, QUERIES), 2, suite="s2", added=20)
    verdict = decide([grown], load_baselines(tmp_path), policy)
    [held] = [c for c in verdict.checks if c.kind == "anchor"]
    assert held.blocking and not held.passed and held.paired.n == QUERIES
    assert verdict.changes[0].compared_with == "unchanged"


@pytest.mark.parametrize(("unchanged", "blocks"), [(9, True), (10, False), (None, False)])
def test_an_anchor_the_suite_changed_under_blocks_in_one_line(tmp_path, unchanged, blocks):
    """An anchor of another suite version with fewer than 10 unchanged queries cannot hold the
    chain of baselines: the `anchor` check blocks and says how many queries are unchanged and
    how many are needed, never skipped silently; then a pinned, accepted re-anchoring on the
    new suite resolves it. One recorded without per-query digests (unknown) warns."""
    rng = np.random.default_rng(11)
    values = rng.uniform(0.3, 0.9, QUERIES)
    promote([_run(values, 0)], tmp_path, GatePolicy())
    path = tmp_path / "d" / "s.json"
    stored = load_baseline(path)
    run = _run(values, 1, suite="s2")
    # The baseline is on the run's suite; its anchor on an older one sharing `unchanged` queries.
    shared = sorted(run.query_digests)[: unchanged or 0]
    digests = {q: (d if q in shared else f"old-{q}") for q, d in run.query_digests.items()}
    anchor = snapshot(stored).model_copy(
        update={"suite": "s1", "query_digests": digests if unchanged is not None else {}}
    )
    held = stored.model_copy(update={"suite": "s2", "anchor": anchor})
    verdict = decide([run], {("d", "s"): held}, GatePolicy())
    [check] = [c for c in verdict.checks if c.kind == "anchor"]
    assert verdict.passed is not blocks and check.blocking is blocks
    if unchanged is None:  # unknown: a warning, named
        assert not check.passed and check in verdict.warnings
        assert "another suite version and it recorded no per-query digests" in check.message
        assert check.message.endswith("--pin-anchor") and "\n" not in check.message
        return
    if not blocks:
        assert check.passed and check.paired.n == 10
        return
    why = "only 9 of its queries are unchanged (at least 10 needed)"
    assert f"another suite version and {why}" in check.message
    assert "--pin-anchor --accept-worse" in check.message and "\n" not in check.message
    assert verdict.summary.endswith("anchor check")
    # A reviewed re-anchoring on the new suite resolves it.
    write_baseline(held, path)
    with pytest.raises(InputError, match="cannot be compared with its anchor"):
        promote([run], tmp_path, GatePolicy(), pin_anchor=True)
    promote([run], tmp_path, GatePolicy(), pin_anchor=True, accept_worse="suite v2 reviewed")
    assert decide([run], load_baselines(tmp_path), GatePolicy()).passed
