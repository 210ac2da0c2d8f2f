"""The gate's statistics through the real `dagster job execute` exit code, one behaviour a test.

Each test builds a BEIR-layout suite in tmp_path where every query has one relevant document
(label 1) and nine judged non-relevant ones (label 0), and a `run_file` system whose run fixes
each query's per-query values exactly: nDCG@10 is 1/log2(rank + 1) of the relevant document.
The baseline is recorded from a first run (in-process) with `rageval baseline update`; the
second run file then stands for a system whose code changed while its configuration did not, so
the baseline is given the new file's fingerprint and the comparison blocks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from rageval_pipeline.cli import main as rageval_main
from rageval_pipeline.core.gate import baseline_path
from rageval_pipeline.core.systems import load_systems
from tests.jobs import dagster_execute, materialize_job

pytestmark = pytest.mark.slow
SUITE = "synth"
SYSTEM = "ours"


def write_suite(data: Path, n_queries: int, unjudged: int = 0) -> None:
    """Queries s000.., relevant r<i>, judged non-relevant n<i>_<j>, unjudged u<i>_<j>."""
    folder = data / "suites" / SUITE
    (folder / "qrels").mkdir(parents=True)
    queries, corpus, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for i in range(n_queries):
        queries.append({"_id": f"s{i:03d}", "text": f"question {i}"})
        corpus.append({"_id": f"r{i}", "title": "", "text": f"answer {i}"})
        qrels.append(f"s{i:03d}\tr{i}\t1")
        for j in range(9):
            corpus.append({"_id": f"n{i}_{j}", "title": "", "text": f"near miss {i} {j}"})
            qrels.append(f"s{i:03d}\tn{i}_{j}\t0")
        for j in range(unjudged):
            corpus.append({"_id": f"u{i}_{j}", "title": "", "text": f"never judged {i} {j}"})
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")


def write_run(data: Path, ranks: dict[int, int], n_queries: int, unjudged: int = 0) -> None:
    """Ten results a query: `unjudged` unjudged documents first, then the judged ones with the
    relevant document at `ranks[i]` among them (default 1)."""
    lines = []
    for i in range(n_queries):
        judged = [f"n{i}_{j}" for j in range(9)]
        judged.insert(ranks.get(i, 1) - 1, f"r{i}")
        docs = ([f"u{i}_{j}" for j in range(unjudged)] + judged)[:10]
        lines += [f"s{i:03d} Q0 {d} {r} {10 - r} run" for r, d in enumerate(docs, start=1)]
    path = data / "runs" / "ours.trec"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def setup_home(home: Path, n_queries: int, *, unjudged: int = 0, policy: dict | None = None):
    data = home / "data"
    write_suite(data, n_queries, unjudged)
    systems = {"systems": {SYSTEM: {"retriever": "run_file", "path": "runs/ours.trec"}}}
    (data / "systems.yaml").write_text(json.dumps(systems))
    if policy is not None:
        gate = yaml.safe_load((data / "gate.yaml").read_text())
        gate["datasets"]["default"].update(policy)
        (data / "gate.yaml").write_text(json.dumps(gate))
    (home / "dagster_home").mkdir()
    return {**os.environ, "DAGSTER_HOME": str(home / "dagster_home")}


def judge_change(home: Path, env: dict, n_queries: int, baseline_run: dict, new_run: dict):
    """Run A, record it as the baseline, run B against it; B's process and gate report. A is
    evaluated and recorded in this process (the RAGEVAL_* variables of pipeline_home): the
    baseline it leaves is what the CLI's would be, and B's judgment is the real CLI's."""
    data = home / "data"
    write_run(data, n_queries=n_queries, **baseline_run)
    assert materialize_job(f"evaluate_{SYSTEM}", SUITE).success
    assert rageval_main(["baseline", "update", "--dataset", SUITE]) == 0
    write_run(data, n_queries=n_queries, **new_run)
    path = baseline_path(data / "baselines", SUITE, SYSTEM)
    baseline = json.loads(path.read_text())
    baseline["fingerprint"] = load_systems(data / "systems.yaml")[SYSTEM].fingerprint()
    path.write_text(json.dumps(baseline))
    second = dagster_execute(f"evaluate_{SYSTEM}", SUITE, env, home)
    [report] = (home / "storage" / "reports").glob("*/latest/gate.json")
    return second, json.loads(report.read_text())


def approx(value: float):
    return pytest.approx(value, abs=1e-4)


def baseline_checks(report: dict, measure: str) -> dict:
    [check] = [c for c in report["checks"] if c["kind"] == "baseline" and c["measure"] == measure]
    return check


# One query in five loses its relevant document from rank 1 to rank 4: nDCG@10 of those falls
# from 1 to 1/log2(5) = 0.4307, the mean by 0.1139, beyond the 5% tolerance (0.05).
DROPPED = {i: 4 for i in range(0, 200, 5)}


def test_a_drop_beyond_tolerance_on_a_large_suite_fails(pipeline_home):
    env = setup_home(pipeline_home, 200)
    result, report = judge_change(pipeline_home, env, 200, {"ranks": {}}, {"ranks": DROPPED})
    assert result.returncode != 0
    assert report["categories"] == ["ranking_shift"]
    ndcg = baseline_checks(report, "nDCG@10")
    assert ndcg["delta"] == approx(-0.1139) and not ndcg["inconclusive"]
    assert ndcg["paired"]["ci_high"] < -0.05  # the whole interval is beyond the band
    assert ndcg["paired"]["p_holm"] < 0.05


def test_the_same_drop_on_ten_queries_is_inconclusive_and_blocks(pipeline_home):
    env = setup_home(pipeline_home, 10)
    dropped = {i: 4 for i in range(0, 10, 5)}  # 2 of 10: the same mean drop, 0.1139
    result, report = judge_change(pipeline_home, env, 10, {"ranks": {}}, {"ranks": dropped})
    assert result.returncode != 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert not report["passed"] and report["categories"] == []
    ndcg = baseline_checks(report, "nDCG@10")
    assert ndcg["delta"] == approx(-0.1139)
    # A PASS must be earned: a drop the suite cannot tell from the band's blocks by default.
    assert ndcg["inconclusive"] and not ndcg["passed"] and ndcg["blocking"]
    assert ndcg["paired"]["ci_high"] >= -0.05
    resolution = ndcg["resolution"]  # the suite is too small for its tolerance, and says so
    assert not resolution["resolves"] and resolution["needed"] > 10
    assert resolution["detectable"] == approx(0.05 + ndcg["paired"]["mde"])
    assert report["summary"].endswith(f"run(s) ({SYSTEM}): inconclusive")
    assert "inconclusive" in result.stdout + result.stderr


def test_noise_inside_tolerance_passes(pipeline_home):
    env = setup_home(pipeline_home, 200)
    # Twenty queries lose their first place and twenty others gain it: the mean holds.
    before = {i: 2 for i in range(0, 200, 10)}
    after = {i: 2 for i in range(5, 200, 10)}
    result, report = judge_change(pipeline_home, env, 200, {"ranks": before}, {"ranks": after})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert report["passed"] and report["categories"] == []
    ndcg = baseline_checks(report, "nDCG@10")
    assert ndcg["passed"] and not ndcg["inconclusive"]
    assert ndcg["delta"] == approx(0.0)
    # Baselines store 6 decimals, so the differences are not exactly symmetric: p is near 1.
    assert ndcg["paired"]["p_value"] > 0.5


def test_unjudged_documents_raise_unjudged_spike_and_not_ranking_shift(pipeline_home):
    # Five never-judged documents ahead of the same judged ranking: the standard measures fall,
    # the condensed ones do not. The policy makes unjudged_spike blocking so it shows.
    env = setup_home(pipeline_home, 50, unjudged=5, policy={"unjudged": {"blocking": True}})
    result, report = judge_change(
        pipeline_home, env, 50, {"ranks": {}}, {"ranks": {}, "unjudged": 5}
    )
    assert result.returncode != 0
    assert report["categories"] == ["unjudged_spike"]
    assert not [c for c in report["checks"] if c["category"] == "ranking_shift"]
    [coverage] = [c for c in report["checks"] if c["kind"] == "unjudged"]
    assert coverage["value"] == approx(0.5) and coverage["reference"] == approx(0.0)
    assert "missing judgments" in coverage["message"]
    assert baseline_checks(report, "nDCG@10")["category"] == "unjudged_spike"
    # The condensed measure is watched (the primary measure decides) and held.
    [condensed] = [c for c in report["checks"] if c["measure"] == "nDCG(judged)@10"]
    assert condensed["kind"] == "watched" and condensed["passed"]
