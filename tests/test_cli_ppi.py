"""`rageval eval` and `rageval compare` with `--llm-qrels`: PPI++ estimates through the real CLI,
and the refusal of a human subset that is not the recorded random draw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.statistics.frames import commit_frame, frame_path
from rageval_pipeline.core.statistics.ppi import ppi_mean
from rageval_pipeline.core.statistics.sampling import draw_sample, sample_path, write_sample

QUERIES, DOCS, HUMAN = 80, 6, 20


@pytest.fixture
def suite(tmp_path: Path) -> dict[str, str]:
    """80 queries of 6 documents: true grades on a seeded draw of 20 (the human qrels, with
    their sampling record beside them), a biased judge's grades on all 80, and two runs."""
    rng = np.random.default_rng(26)
    frame = [f"q{i:02d}" for i in range(QUERIES)]
    sample = draw_sample(frame, HUMAN)
    truth = rng.choice(4, size=(QUERIES, DOCS), p=[0.5, 0.25, 0.15, 0.1])
    truth[:, 0] = np.maximum(truth[:, 0], 1)  # every query has a relevant document
    llm = np.clip(truth + (rng.random(truth.shape) < 0.3), 0, 3)
    paths = {name: tmp_path / f"{name}.trec" for name in ("human", "llm", "a", "b")}
    drawn = set(sample.drawn())

    def qrels(grades: np.ndarray, queries: set[str]) -> str:
        return "".join(
            f"{q} 0 d{d} {grades[i, d]}\n"
            for i, q in enumerate(frame)
            if q in queries
            for d in range(DOCS)
        )

    paths["human"].write_text(qrels(truth, drawn))
    paths["llm"].write_text(qrels(llm, set(frame)))
    for name, noise in (("a", 1.5), ("b", 0.8)):
        scores = truth + rng.normal(0, noise, truth.shape)
        lines = [
            f"{q} Q0 d{d} {rank + 1} {scores[i, d]:.6f} {name}\n"
            for i, q in enumerate(frame)
            for rank, d in enumerate(np.argsort(-scores[i], kind="stable"))
        ]
        paths[name].write_text("".join(lines))
    write_sample(sample, sample_path(paths["human"]))
    commit_frame(frame, frame_path(paths["human"]))  # written when the population was made
    return {k: str(v) for k, v in paths.items()} | {"sample": str(sample_path(paths["human"]))}


def _per_query(capsys, qrels: str, run: str, queries: list[str]) -> np.ndarray:
    """nDCG@10 per query as `rageval eval` prints it; an unlisted query (no relevant
    judgment) scores 0."""
    assert main(["eval", qrels, run, "-m", "nDCG@10", "--format", "json"]) == 0
    values = json.loads(capsys.readouterr().out)["per_query"]
    return np.array([values.get(q, {}).get("nDCG@10", 0.0) for q in queries])


def _split(suite: dict[str, str]) -> tuple[list[str], list[str]]:
    drawn = json.loads(Path(suite["sample"]).read_text())
    sampled = draw_sample(drawn["frame"], drawn["size"]).drawn()
    return sampled, sorted(set(drawn["frame"]) - set(sampled))


def test_eval_prints_the_ppi_estimate_of_each_measure(suite, capsys):
    argv = ["eval", suite["human"], suite["b"], "-m", "nDCG@10", "-m", "P@5"]
    assert main([*argv, "--llm-qrels", suite["llm"], "--format", "json"]) == 0
    ppi = json.loads(capsys.readouterr().out)["ppi"]
    assert set(ppi) == {"nDCG@10", "P@5"}
    assert set(ppi["nDCG@10"]) >= {"estimate", "ci_low", "ci_high", "n_human", "n_llm"}
    assert (ppi["nDCG@10"]["n_human"], ppi["nDCG@10"]["n_llm"]) == (HUMAN, QUERIES)

    sampled, others = _split(suite)
    human = _per_query(capsys, suite["human"], suite["b"], sampled)
    llm = _per_query(capsys, suite["llm"], suite["b"], sampled + others)
    expected = ppi_mean(human, llm[:HUMAN], llm[HUMAN:])
    got = ppi["nDCG@10"]
    assert (got["estimate"], got["ci_low"], got["ci_high"]) == pytest.approx(
        (expected.estimate, expected.ci_low, expected.ci_high), abs=1e-12
    )
    assert main([*argv, "--llm-qrels", suite["llm"]]) == 0  # the table has a ppi line a measure
    table = [line for line in capsys.readouterr().out.splitlines() if "\tppi\t" in line]
    assert [line.split("\t")[0].strip() for line in table] == ["nDCG@10", "P@5"]


def test_compare_prints_the_ppi_paired_delta(suite, capsys):
    argv = ["compare", suite["human"], suite["a"], suite["b"], "-m", "nDCG@10"]
    assert main([*argv, "--llm-qrels", suite["llm"], "--format", "json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert set(record["ppi"]) == {"a", "b", "delta"}
    sampled, others = _split(suite)
    every = sampled + others
    human = _per_query(capsys, suite["human"], suite["b"], sampled) - _per_query(
        capsys, suite["human"], suite["a"], sampled
    )
    llm = _per_query(capsys, suite["llm"], suite["b"], every) - _per_query(
        capsys, suite["llm"], suite["a"], every
    )
    expected = ppi_mean(human, llm[:HUMAN], llm[HUMAN:])
    delta = record["ppi"]["delta"]
    assert (delta["estimate"], delta["ci_low"], delta["ci_high"]) == pytest.approx(
        (expected.estimate, expected.ci_low, expected.ci_high), abs=1e-12
    )
    assert record["n_queries"] <= HUMAN and "p_randomization" in record  # human-only, as before


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    return err[0]


def test_a_human_subset_that_is_not_the_recorded_draw_is_refused(suite, capsys):
    record = json.loads(Path(suite["sample"]).read_text())
    argv = ["eval", suite["human"], suite["b"], "--llm-qrels", suite["llm"]]
    larger = draw_sample(record["frame"], record["size"] + 1)
    Path(suite["sample"]).write_text(larger.model_dump_json())
    assert "not the recorded random draw" in _refused(capsys, argv)
    # A seed chosen by hand (say the best of 20 draws) or written as a string: refused.
    for seed in (record["seed"] + 1, str(record["seed"])):
        Path(suite["sample"]).write_text(json.dumps(record | {"seed": seed}))
        assert ": seed: " in _refused(capsys, argv)
    Path(suite["sample"]).unlink()
    assert "no sampling record" in _refused(capsys, argv)


def test_a_drawn_query_without_a_human_value_is_refused_not_scored_zero(suite, capsys):
    """A drawn query judged with nothing relevant has no nDCG@10: refused, naming the qrels."""
    first = draw_sample(json.loads(Path(suite["sample"]).read_text())["frame"], HUMAN).drawn()[0]
    lines = Path(suite["human"]).read_text().splitlines(True)
    zeroed = [f"{ln.rsplit(' ', 1)[0]} 0\n" if ln.startswith(f"{first} ") else ln for ln in lines]
    Path(suite["human"]).write_text("".join(zeroed))
    argv = ["eval", suite["human"], suite["b"], "-m", "nDCG@10", "--llm-qrels", suite["llm"]]
    assert main(argv) == 2
    [error] = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("note: ")]
    assert error.startswith(f"error: {suite['human']}: ") and f"first: {first}" in error


def test_llm_qrels_must_cover_the_frame_and_csv_is_refused(suite, capsys, tmp_path):
    partial = tmp_path / "partial.trec"
    partial.write_text("".join(Path(suite["llm"]).read_text().splitlines(True)[DOCS:]))
    argv = ["eval", suite["human"], suite["b"]]
    assert "no LLM judgment" in _refused(capsys, [*argv, "--llm-qrels", str(partial)])
    with pytest.raises(SystemExit):
        main([*argv, "--llm-qrels", suite["llm"], "--format", "csv"])


def test_rageval_gate_decides_with_the_ppi_interval_and_refuses_a_shopped_seed(suite, capsys):
    """`rageval gate --llm-qrels`: the dataset's rule is `ppi`, the check's paired delta is the
    PPI++ delta `rageval compare` prints (over the rounded per-query values the gate reads)."""
    argv = ["--llm-qrels", suite["llm"], "--format", "json", "-m", "nDCG@10"]
    assert main(["compare", suite["human"], suite["a"], suite["b"], *argv]) == 0
    expected = json.loads(capsys.readouterr().out)[0]["ppi"]["delta"]
    gate = ["gate", suite["human"], suite["a"], suite["b"]]
    assert main([*gate, *argv]) in (0, 1)
    verdict = json.loads(capsys.readouterr().out)
    [check] = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    assert check["paired"]["n"] == QUERIES and "PPI++" in check["message"]
    assert (check["paired"]["ci_low"], check["paired"]["ci_high"]) == pytest.approx(
        (expected["ci_low"], expected["ci_high"]), abs=1e-5
    )
    record = json.loads(Path(suite["sample"]).read_text())
    Path(suite["sample"]).write_text(json.dumps(record | {"seed": 3}))  # the best of 20 seeds
    assert ": seed: 3 is not the seed this frame commits to" in _refused(capsys, [*gate, *argv])


def test_rageval_gate_refuses_a_frame_that_is_not_the_committed_one(suite, capsys, tmp_path):
    """Frame shopping: dropping one query from the frame commits to another seed and another
    draw, which every check of the draw accepts; the committed frame refuses it, naming the id."""
    gate = ["gate", suite["human"], suite["a"], suite["b"]]
    argv = [*gate, "--llm-qrels", suite["llm"], "-m", "nDCG@10"]
    frame = [f"q{i:02d}" for i in range(QUERIES)]
    dropped = frame[7]
    shopped = draw_sample([q for q in frame if q != dropped], HUMAN)  # a valid record of its own
    human = tmp_path / "shopped.trec"  # the human qrels of exactly its draw
    kept = set(shopped.drawn())
    human.write_text(
        "".join(
            line
            for line in Path(suite["llm"]).read_text().splitlines(True)
            if line.split()[0] in kept
        )
    )
    write_sample(shopped, sample_path(human))
    Path(frame_path(human)).write_text(Path(frame_path(suite["human"])).read_text())
    argv[1] = str(human)  # the qrels
    err = _refused(capsys, argv)
    assert "the sampling record's frame (79 queries) is not the committed frame (80" in err
    assert f"removed: {dropped}" in err and ": frame:" in err
    # With the committed frame rewritten to match, its digest no longer matches its ids.
    committed = json.loads(Path(frame_path(human)).read_text())
    committed["frame"].remove(dropped)
    Path(frame_path(human)).write_text(json.dumps(committed))
    assert ": sha256: " in _refused(capsys, argv)
    # And without a committed frame the gate decides nothing.
    Path(frame_path(human)).unlink()
    assert "no committed frame" in _refused(capsys, argv)
