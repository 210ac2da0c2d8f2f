"""`rageval gate` on run files, through the real CLI: a 10% drop blocks (exit 1), the baseline
against itself passes (exit 0), bad input is one line (exit 2), and the verdict is the one
`core.gate.decide` gives the pipeline's summaries."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from rageval_pipeline.cli import main

QUERIES, DOCS = 50, 20
_DISCOUNT = 1 / np.log2(np.arange(2, 12))


def _ndcg10(grades: np.ndarray, order: np.ndarray) -> float:
    """trec_eval's nDCG@10 (linear gains) of one query's ranking `order` of its documents."""
    ideal = (np.sort(grades)[::-1][:10] * _DISCOUNT).sum()
    return float((grades[order][:10] * _DISCOUNT).sum() / ideal)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """50 queries of 20 judged documents (2 to 6 relevant, graded 1-3); a baseline run ranking
    them by grade plus noise; and a run whose per-query nDCG@10 is the baseline's minus 10% of
    it, give or take 0.1 (of the candidate rankings of each query, the closest to that)."""
    folder = tmp_path_factory.mktemp("gate_suite")
    rng = np.random.default_rng(32)
    noise = rng.normal(0, 0.1, QUERIES)
    noise -= noise.mean()  # the drop is 10% on average, not 10% give or take the draw's mean
    qrels, runs = [], {name: [] for name in ("baseline", "worse", *BROKEN)}
    for i in range(QUERIES):
        query = f"q{i:02d}"
        grades = np.zeros(DOCS, dtype=int)
        relevant = rng.choice(DOCS, rng.integers(2, 7), replace=False)
        grades[relevant] = rng.integers(1, 4, len(relevant))
        qrels += [f"{query} 0 d{d} {g}\n" for d, g in enumerate(grades)]
        base = np.argsort(-(grades + rng.normal(0, 1.5, DOCS)), kind="stable")
        target = _ndcg10(grades, base) * 0.9 + noise[i]
        candidates = [
            np.argsort(-(grades + rng.normal(0, scale, DOCS)), kind="stable")
            for scale in np.linspace(0.1, 4, 40)
            for _ in range(10)
        ]
        worse = min(candidates, key=lambda order: abs(_ndcg10(grades, order) - target))
        for name, order in (("baseline", base), ("worse", worse)):
            runs[name] += [
                f"{query} Q0 d{d} {rank} {DOCS - rank} {name}\n" for rank, d in enumerate(order, 1)
            ]
        _broken_cases(runs, query, grades, base, candidates, lost=i in LOST)
    paths = {"qrels": folder / "qrels.txt"}
    paths["qrels"].write_text("".join(qrels))
    for name, lines in runs.items():
        paths[name] = folder / f"{name}.run"
        paths[name].write_text("".join(lines))
    return {k: str(v) for k, v in paths.items()}


# Queries whose answer the `lost` run drops out of the top 10 (their baseline nDCG@10 >= 0.5).
LOST = (3, 17, 29, 41)
BROKEN = ("renamed", "missing", "lost")
MISSING = 9


def _lines(query: str, order: np.ndarray, name: str, prefix: str = "d") -> list[str]:
    return [
        f"{query} Q0 {prefix}{d} {rank} {DOCS - rank} {name}\n" for rank, d in enumerate(order, 1)
    ]


def _broken_cases(runs, query, grades, base, candidates, *, lost: bool) -> None:
    """The must-show runs: every id replaced; the baseline's run without the 9 queries that got
    worse (the first 9: a run that worsened them and left them out); 4 of 50 queries losing
    their answer (every relevant document below rank 10) while the others gain
    a little (the candidate ranking closest to the baseline's nDCG@10 + 0.06)."""
    runs["renamed"] += _lines(query, base, "renamed", prefix="x")
    if int(query[1:]) >= MISSING:
        runs["missing"] += _lines(query, base, "missing")
    before = _ndcg10(grades, base)
    if lost:
        assert before >= 0.5, (query, before)
        order = np.argsort(grades > 0, kind="stable")  # non-relevant first
    else:
        order = min(candidates, key=lambda o: abs(_ndcg10(grades, o) - min(before + 0.06, 1)))
    runs["lost"] += _lines(query, order, "lost")


def _gate(suite: dict[str, str], run: str, *more: str) -> list[str]:
    return ["gate", suite["qrels"], suite["baseline"], run, *more]


def _mean_ndcg(capsys, suite: dict[str, str], run: str) -> float:
    assert main(["eval", suite["qrels"], run, "-m", "nDCG@10", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["mean"]["nDCG@10"]


def test_a_ten_percent_drop_blocks_and_the_baseline_against_itself_passes(suite, capsys):
    base, worse = (_mean_ndcg(capsys, suite, suite[name]) for name in ("baseline", "worse"))
    assert 0.08 <= 1 - worse / base <= 0.12  # the drop the data were made with, as measured

    assert main(_gate(suite, suite["worse"], "--format", "json")) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert not verdict["passed"] and "ranking_shift" in verdict["categories"]
    [ndcg] = [c for c in verdict["checks"] if c["kind"] == "baseline" and c["measure"] == "nDCG@10"]
    # Blocked either way: failed, or (with the interval Bonferroni-widened over the compared
    # measures for a FAIL claim) inconclusive, which blocks by default (docs/gate.md).
    assert ndcg["blocking"] and not ndcg["passed"]
    assert ndcg["paired"]["n"] == QUERIES and ndcg["paired"]["delta"] == pytest.approx(
        worse - base, abs=1e-4
    )

    assert main(_gate(suite, suite["baseline"])) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# ") and err.startswith("gate: PASS")


def test_the_reports_are_the_assets_files(suite, capsys, tmp_path):
    assert main(_gate(suite, suite["worse"], "-o", str(tmp_path))) == 1
    markdown = capsys.readouterr().out
    assert {p.name for p in tmp_path.iterdir()} >= {"gate.json", "gate.md", "gate.html"}
    assert (tmp_path / "gate.md").read_text() == markdown


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ("qrels", "qrels.txt:1"),
        ("run", "bad.run:1"),
        ("policy", "gate.yaml:1: datasets"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(suite, capsys, tmp_path, broken, expected):
    bad = {"qrels": tmp_path / "qrels.txt", "run": tmp_path / "bad.run"}
    bad["qrels"].write_text("q00 0 d1\n")  # a field short
    bad["run"].write_text("q00 Q0 d1 one 1.0 x\n")  # rank is not an integer
    policy = tmp_path / "gate.yaml"
    policy.write_text("datasets: 3\n")
    argv = _gate(suite, suite["worse"], "--policy", str(policy) if broken == "policy" else "")
    if broken != "policy":
        argv = _gate(suite, str(bad["run"]) if broken == "run" else suite["worse"])
    if broken == "qrels":
        argv[2] = str(bad["qrels"])
    assert main([a for a in argv if a]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err


def _verdict(capsys, suite: dict[str, str], run: str) -> tuple[int, dict, str]:
    code = main(_gate(suite, run, "--format", "json"))
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _failed(verdict: dict, kind: str) -> list[dict]:
    return [c for c in verdict["checks"] if c["kind"] == kind and c["blocking"] and not c["passed"]]


def test_a_run_with_every_id_replaced_is_blocked_naming_the_unjudged_cause(suite, capsys):
    code, verdict, err = _verdict(capsys, suite, suite["renamed"])
    assert code == 1 and err.startswith("gate: FAIL") and "unjudged_run" in err
    [check] = _failed(verdict, "unjudged")
    assert check["category"] == "unjudged_run" and check["value"] == 1.0
    assert "ids likely do not match the corpus" in check["message"]
    assert "rageval pool" in check["message"]


def test_a_run_missing_the_queries_that_got_worse_is_blocked(suite, capsys):
    code, verdict, _ = _verdict(capsys, suite, suite["missing"])
    assert code == 1
    [ndcg] = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    # The left-out queries count 0 against the run: paired over all 50, not the 41 others
    # (which alone are identical to the baseline's and would pass).
    assert ndcg["paired"]["n"] == QUERIES and ndcg["paired"]["delta"] < -0.1
    assert ndcg["blocking"] and not ndcg["passed"]
    left_out = {f"q{i:02d}" for i in range(MISSING)}
    assert {w["query_id"] for w in verdict["worst_queries"]} <= left_out


def test_four_queries_losing_their_answer_block_naming_them(suite, capsys):
    code, verdict, err = _verdict(capsys, suite, suite["lost"])
    assert code == 1 and "semantic_degraded_spike" in err
    [ndcg] = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    assert abs(ndcg["paired"]["delta"]) < 0.03  # the mean moved little
    [guard] = _failed(verdict, "breakage")
    assert guard["category"] == "semantic_degraded_spike"
    named = set(re.findall(r"(q\d\d) [\d.]+ -> 0\.0000", guard["message"]))
    assert named == {f"q{i:02d}" for i in LOST}, guard["message"]


def test_the_primary_measure_a_policy_names_is_scored(suite, capsys, tmp_path):
    # `spike.measure` names the primary measure when no `compare` is listed: `rageval gate`
    # scores it, so the baseline against itself passes on it instead of "not computed".
    policy = tmp_path / "gate.yaml"
    policy.write_text("version: 1\ndatasets:\n  default:\n    spike: {measure: nDCG@20}\n")
    assert main(_gate(suite, suite["baseline"], "--policy", str(policy), "--format", "json")) == 0
    verdict = json.loads(capsys.readouterr().out)
    decided = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    assert [c["measure"] for c in decided] == ["nDCG@20"] and decided[0]["passed"]
