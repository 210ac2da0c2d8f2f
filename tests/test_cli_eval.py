"""`rageval eval` and `rageval compare` through the CLI entry point (and once as a process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "measures"
QRELS, RUN_A, RUN_B = (str(FIXTURES / n) for n in ("qrels.trec", "run_a.trec", "run_b.trec"))
# By hand: run_a ranks q1 as d3 (label 0), d2 (1), d1 (2), d4 and q2 as d8 (unjudged), d9 (1).
# q3 has only a label-0 judgment, so it is left out.
RR = {"q1": 0.5, "q2": 0.5}
P_REL2_AT_5 = {"q1": 1 / 5, "q2": 0.0}


def lines(capsys) -> list[list[str]]:
    return [line.split("\t") for line in capsys.readouterr().out.splitlines()]


def test_eval_prints_like_trec_eval(capsys):
    assert main(["eval", QRELS, RUN_A, "-m", "RR", "-m", "P(rel=2)@5", "--per-query"]) == 0
    rows = {(m.strip(), q): float(v) for m, q, v in lines(capsys)}
    for query in ("q1", "q2"):
        assert rows[("RR", query)] == pytest.approx(RR[query], abs=1e-4)
        assert rows[("P(rel=2)@5", query)] == pytest.approx(P_REL2_AT_5[query], abs=1e-4)
    assert rows[("RR", "all")] == pytest.approx(0.5, abs=1e-4)
    assert rows[("P(rel=2)@5", "all")] == pytest.approx(0.1, abs=1e-4)
    assert ("RR", "q3") not in rows


def test_eval_without_per_query_prints_only_means(capsys):
    assert main(["eval", QRELS, RUN_A, "-m", "MRR"]) == 0
    assert [[m.strip(), q] for m, q, _ in lines(capsys)] == [["RR", "all"]]


def test_eval_json_has_exactly_mean_and_per_query(capsys):
    assert main(["eval", QRELS, RUN_A, "-m", "RR", "-m", "P(rel=2)@5", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document) == {"mean", "per_query"}
    assert document["mean"] == pytest.approx({"RR": 0.5, "P(rel=2)@5": 0.1})
    assert document["per_query"] == {
        q: pytest.approx({"RR": RR[q], "P(rel=2)@5": P_REL2_AT_5[q]}) for q in RR
    }


def test_eval_csv(capsys):
    assert main(["eval", QRELS, RUN_A, "-m", "RR", "--format", "csv", "--per-query"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "measure,query_id,value"
    assert sorted(out[1:]) == ["RR,all,0.500000", "RR,q1,0.500000", "RR,q2,0.500000"]


def test_compare_prints_means_deltas_and_p_values(capsys):
    argv = ["compare", QRELS, RUN_A, RUN_B, "-m", "RR", "--permutations", "200", "--format", "json"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    # run_b puts a relevant doc first for q1 and q2: RR 1.0 for both.
    assert row["measure"] == "RR"
    assert (row["mean_a"], row["mean_b"], row["delta"]) == pytest.approx((0.5, 1.0, 0.5))
    assert 0 <= row["p_randomization_holm"] <= 1
    assert main(["compare", QRELS, RUN_A, RUN_B, "-m", "RR", "--permutations", "200"]) == 0
    table = capsys.readouterr().out
    assert "RR" in table and "+0.5000" in table and "Holm" in table


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["eval", QRELS, str(FIXTURES / "bad_score.trec")], "bad_score.trec:2: score:"),
        (["eval", str(FIXTURES / "bad_fields.qrels"), RUN_A], "bad_fields.qrels:2:"),
        (["eval", QRELS, str(FIXTURES / "dup_doc.trec")], "dup_doc.trec:3: doc_id:"),
        (["compare", QRELS, RUN_A, str(FIXTURES)], "measures: is a folder, not a regular file"),
        (["compare", QRELS, RUN_A, "missing.trec"], "missing.trec: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, expected):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if line.startswith("error:")]) == 1
    assert expected in err[-1]
    assert "Traceback" not in "\n".join(err)


@pytest.mark.slow
def test_console_script_in_a_subprocess():
    script = Path(sys.executable).parent / "rageval"
    done = subprocess.run(
        [str(script), "eval", QRELS, str(FIXTURES / "bad_score.trec")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "bad_score.trec:2: score:" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(
        [str(script), "eval", QRELS, RUN_A, "-m", "RR"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0
    measure, query, value = done.stdout.strip().split("\t")
    assert (measure.strip(), query, float(value)) == ("RR", "all", pytest.approx(0.5))
    assert done.stderr.startswith("note:")  # q3 left out, and said so


def test_document_level_ranks_documents_by_their_best_chunk(tmp_path, capsys):
    # q1's chunks: d3's chunk (label 0) first, then two chunks of d2 (label 1), then d1 (2).
    run = pd.DataFrame(
        {
            "query_id": ["q1"] * 4,
            "doc_id": ["d3:chunk:0", "d2:chunk:1", "d2:chunk:0", "d1:chunk:0"],
            "source_id": ["d3", "d2", "d2", "d1"],
            "score": [4.0, 3.0, 2.0, 1.0],
        }
    )
    path = tmp_path / "chunks.parquet"
    run.to_parquet(path)
    assert main(["eval", QRELS, str(path), "-m", "RR", "-m", "P@3", "--per-query"]) == 0
    as_chunks = {(m.strip(), q): float(v) for m, q, v in lines(capsys)}
    assert as_chunks[("RR", "q1")] == 0.0  # chunk ids are not judged
    assert main(["eval", QRELS, str(path), "-m", "RR", "-m", "P@3", "--document-level", "-q"]) == 0
    as_documents = {(m.strip(), q): float(v) for m, q, v in lines(capsys)}
    assert as_documents[("RR", "q1")] == pytest.approx(1 / 2, abs=1e-4)
    assert as_documents[("P@3", "q1")] == pytest.approx(2 / 3, abs=1e-4)  # d3, d2, d1


def rageval(*args: str) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it."""
    script = Path(sys.executable).parent / "rageval"
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120)


def test_document_level_is_refused_for_chunk_level_qrels(tmp_path):
    """Chunk ids can never match the run's documents: every score would be 0.0000."""
    qrels = tmp_path / "chunks.qrels"
    qrels.write_text("q1 0 d1:chunk:0 2\nq1 0 d2:chunk:3 1\nq2 0 d9:chunk:1 1\n")
    refusal = (
        f"error: {qrels}: every judged id is a chunk id (doc:chunk:n): these are chunk-level "
        "judgments, which --document-level cannot match; score the chunk run without it\n"
    )
    for argv in (["eval", str(qrels), RUN_A], ["compare", str(qrels), RUN_A, RUN_B]):
        done = rageval(*argv, "--document-level")
        assert (done.returncode, done.stdout, done.stderr) == (2, "", refusal)
    # One document id among them: not chunk-level by the rule, so it is scored.
    qrels.write_text("q1 0 d1 2\nq1 0 d2:chunk:3 1\nq2 0 d9:chunk:1 1\n")
    done = rageval("eval", str(qrels), RUN_A, "--document-level", "-m", "RR")
    assert done.returncode == 0 and done.stdout.split("\t")[:2] == ["RR          ", "all"]


def test_judged_queries_missing_from_the_run_are_noted_with_the_rule(tmp_path):
    qrels = tmp_path / "more.qrels"
    qrels.write_text(Path(QRELS).read_text() + "q4 0 d1 1\nq5 0 d2 2\n")
    done = rageval("eval", str(qrels), RUN_A, "-m", "RR")
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"note: {RUN_A}: 1 query has no relevant judgment (label >= 1) in {qrels} and is left "
        "out (only queries with one are scored): q3",
        f"note: {RUN_A}: 2 judged queries of {qrels} are not in the run and score 0 on every "
        "measure (as trec_eval -c scores them; plain trec_eval skips them): q4, q5",
    ]
    # q1 and q2 score RR 0.5 each (see RR above), q4 and q5 score 0.
    assert float(done.stdout.split("\t")[2]) == pytest.approx((0.5 + 0.5) / 4)
    complete = rageval("eval", QRELS, RUN_A, "-m", "RR")
    assert "not in the run" not in complete.stderr


def test_compare_help_prints_a_single_percent_sign():
    done = rageval("compare", "--help")
    assert done.returncode == 0
    assert "B - A with a 95% CI" in " ".join(done.stdout.split()) and "%%" not in done.stdout


@pytest.mark.parametrize(
    "argv",
    [["eval", RUN_A, QRELS], ["compare", RUN_A, QRELS, RUN_B], ["compare", RUN_A, RUN_B, QRELS]],
)
def test_qrels_and_run_given_in_each_others_place_look_swapped(argv):
    done = rageval(*argv)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: {RUN_A}: reads as a run and {QRELS} as qrels: the arguments look swapped "
        "(QRELS comes first, then the run)\n"
    )


def test_a_run_that_is_not_qrels_is_not_called_swapped():
    """Both must read only as the other kind: a bad run file keeps its own error."""
    done = rageval("eval", RUN_A, str(FIXTURES / "bad_score.trec"))
    assert done.returncode == 2
    assert "swapped" not in done.stderr
    assert done.stderr.startswith(f"error: {RUN_A}:1: found 6 whitespace-separated fields")


@pytest.mark.slow
def _pytrec_eval(qrels: list[tuple], run: list[tuple], names: set[str]) -> dict:
    """pytrec_eval's per-query values of (query, doc, label) qrels and (query, doc, score) rows."""
    import pytrec_eval

    trec_qrels: dict[str, dict[str, int]] = {}
    for q, d, r in qrels:
        trec_qrels.setdefault(q, {})[d] = r
    trec_run: dict[str, dict[str, float]] = {}
    for q, d, s in run:
        trec_run.setdefault(q, {})[d] = s
    return pytrec_eval.RelevanceEvaluator(trec_qrels, names).evaluate(trec_run)


def test_arrow_path_imports_no_pandas_and_agrees_with_pytrec_eval(tmp_path):
    """`rageval eval` on TREC files with the numpy-and-Arrow measures (`pyarrow_without_pandas`)
    never imports pandas, and every per-query value and mean is pytrec_eval's: graded labels,
    tied scores, unjudged documents, rows out of order, a judged query the run lacks (0)."""

    rng = np.random.default_rng(35)
    qrels, run = [], []
    for q in range(40):
        docs = rng.choice(60, size=30, replace=False)
        qrels += [(f"q{q}", f"d{d}", int(rng.integers(0, 4))) for d in docs[:15]]
        if q != 7:  # q7 is judged and not retrieved
            run += [(f"q{q}", f"d{d}", float(rng.integers(0, 6))) for d in docs[5:]]
    order = rng.permutation(len(run))
    (tmp_path / "qrels.trec").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels))
    lines = [f"{run[i][0]} Q0 {run[i][1]} 1 {run[i][2]!r} t\n" for i in order]
    (tmp_path / "run.trec").write_text("".join(lines))
    pairs = {
        "nDCG@10": "ndcg_cut_10",
        "P@5": "P_5",
        "R@10": "recall_10",
        "RR": "recip_rank",
        "AP": "map",
        "Rprec": "Rprec",
        "Success@3": "success_3",
    }
    argv = ["eval", str(tmp_path / "qrels.trec"), str(tmp_path / "run.trec"), "--format", "json"]
    argv += [flag for measure in pairs for flag in ("-m", measure)]
    program = (
        "import sys; from rageval_pipeline.cli import main; status = main(sys.argv[1:]); "
        "sys.exit(3 if 'pandas' in sys.modules else status)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr  # 3: pandas was imported
    ours = json.loads(done.stdout)

    theirs = _pytrec_eval(qrels, run, set(pairs.values()))
    judged = {q for q, _, r in qrels if r >= 1}
    assert set(ours["per_query"]) == judged and "q7" in judged
    for measure, name in pairs.items():
        expected = [theirs[q][name] if q in theirs else 0.0 for q in sorted(judged)]
        got = [ours["per_query"][q][measure] for q in sorted(judged)]
        assert got == pytest.approx(expected, abs=1e-9), measure
        assert ours["mean"][measure] == pytest.approx(np.mean(expected), abs=1e-9), measure


def test_a_run_keyed_in_pieces_and_probed_in_halves_agrees_with_pytrec_eval(tmp_path, capsys):
    """A grouped run of 1,500 queries (150,000 rows, tied scores): its reader keys it in pieces
    of whole queries and the join probes it in two halves (`formats._keyed`, `join._matches`);
    every per-query value is pytrec_eval's."""

    rng = np.random.default_rng(46)
    queries, docs = 1500, 100
    qrels = [
        (f"q{q}", f"d{d}", int(rng.integers(0, 4)))
        for q in range(queries)
        for d in rng.choice(400, size=12, replace=False)
    ]
    run = [
        (f"q{q}", f"d{d}", float(s))
        for q in range(queries)
        for d, s in zip(
            rng.choice(400, size=docs, replace=False),
            -np.sort(-rng.integers(0, 30, size=docs)),  # descending, many ties
            strict=True,
        )
    ]
    (tmp_path / "qrels.trec").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels))
    (tmp_path / "run.trec").write_text("".join(f"{q} Q0 {d} 1 {s!r} t\n" for q, d, s in run))
    argv = ["eval", str(tmp_path / "qrels.trec"), str(tmp_path / "run.trec"), "--format", "json"]
    assert main([*argv, "-m", "nDCG@10", "-m", "R@100", "-m", "RR"]) == 0
    ours = json.loads(capsys.readouterr().out)["per_query"]
    names = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "RR": "recip_rank"}
    theirs = _pytrec_eval(qrels, run, set(names.values()))
    assert set(ours) == {q for q, _, r in qrels if r >= 1}
    for query, values in ours.items():
        for measure, name in names.items():
            assert values[measure] == pytest.approx(theirs[query][name], abs=1e-12), query


def test_evals_process_settings_are_undone_afterwards(monkeypatch):
    """`quiet_process` turns collection off and sets its environment only while eval runs,
    keeping a value the user set."""
    import gc
    import os

    from rageval_pipeline.cli.eval_process import quiet_process

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    assert gc.isenabled()
    with quiet_process():
        assert not gc.isenabled()
        assert os.environ["OPENBLAS_NUM_THREADS"] == "4"
        assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "1"
    assert gc.isenabled()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ
