"""`rageval gate` on run files, through the real CLI: a 10% drop blocks (exit 1), the baseline
against itself passes (exit 0), bad input is one line (exit 2), and the verdict is the one
`core.gate.decide` gives the pipeline's summaries."""

from __future__ import annotations

import json

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
    qrels, runs = [], {"baseline": [], "worse": []}
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
    paths = {"qrels": folder / "qrels.txt"}
    paths["qrels"].write_text("".join(qrels))
    for name, lines in runs.items():
        paths[name] = folder / f"{name}.run"
        paths[name].write_text("".join(lines))
    return {k: str(v) for k, v in paths.items()}


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
