"""`rageval` as a well-behaved command: fast start, quiet broken pipes, bad options refused by
argument parsing, and every bad input one line on stderr with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rageval_pipeline.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "measures"
QRELS, RUN_A, RUN_B = (str(FIXTURES / n) for n in ("qrels.trec", "run_a.trec", "run_b.trec"))
REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "torch", "scipy", "dagster", "duckdb", "sentence_transformers")


def loaded_after(argv: list[str], tmp_path: Path) -> dict:
    """Run `rageval ARGV` in a fresh interpreter; return its exit code and heavy modules loaded."""
    script = (
        "import json, sys\n"
        "from rageval_pipeline.cli import main\n"
        "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'code': code, 'heavy': heavy}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv", [["--help"], ["eval", "--help"], ["compare", "--help"], ["history", "--help"]]
)
def test_help_loads_no_heavy_library(tmp_path, argv):
    assert loaded_after(argv, tmp_path) == {"code": 0, "heavy": []}


def test_validate_loads_no_model_statistics_or_dagster(tmp_path):
    suite = REPO / "data" / "suites" / "beir-mini"
    result = loaded_after(["validate", str(suite)], tmp_path)
    assert result["code"] in (0, 2)
    # pandas still comes with the suites' table builders; the rest must not.
    assert set(result["heavy"]) <= {"pandas"}


def many_queries_run(tmp_path: Path, queries: int = 4000) -> tuple[str, str]:
    qrels = tmp_path / "qrels"
    run = tmp_path / "run"
    qrels.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(queries)))
    run.write_text("".join(f"q{i} Q0 d{i} 1 2.5 t\nq{i} Q0 e{i} 2 1.5 t\n" for i in range(queries)))
    return str(qrels), str(run)


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["head -1", "head -c 10", "true"])
def test_stdout_closed_early_exits_quietly(tmp_path, reader):
    qrels, run = many_queries_run(tmp_path)
    rageval = Path(sys.executable).parent / "rageval"
    command = f"{rageval} eval {qrels} {run} -q -m RR | {reader}"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert done.stderr == ""
    assert done.returncode == 0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["compare", QRELS, RUN_A, RUN_B, "--permutations", "0"], "0 is below the minimum 1"),
        (["compare", QRELS, RUN_A, RUN_B, "--permutations", "-5"], "-5 is below the minimum 1"),
        (["compare", QRELS, RUN_A, RUN_B, "--permutations", "ten"], "'ten' is not an integer"),
        (["compare", QRELS, RUN_A, RUN_B, "--seed", "-1"], "-1 is below the minimum 0"),
        (["history", "--dataset", "x", "--limit", "0"], "0 is below the minimum 1"),
        (["history", "--dataset", "x", "--limit", "-3"], "-3 is below the minimum 1"),
        (["eval", QRELS, RUN_A, "-m", "P@0"], 'measure "P@0": Input should be greater than'),
        (["eval", QRELS, RUN_A, "-m", "nDCG@-1"], 'cannot parse measure "nDCG@-1"'),
        (["eval", QRELS, RUN_A, "-m", "nDCG@ten"], 'cannot parse measure "nDCG@ten"'),
        # Named once the run's reading has started, still before any file's error.
        (["eval", "missing", "missing.trec", "-m", "P@x"], 'cannot parse measure "P@x"'),
        (["compare", QRELS, RUN_A, "missing", "-m", "R@0"], 'measure "R@0": Input should be'),
    ],
)
def test_bad_option_values_are_refused_by_argument_parsing(capsys, argv, expected):
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {'-m/--measure' if '-m' in argv else '--'}" in err
    assert expected in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["eval", str(FIXTURES), RUN_A], "measures: is a folder, not a regular file"),
        (["eval", QRELS, str(FIXTURES)], "measures: is a folder, not a regular file"),
        (
            ["compare", QRELS, RUN_A, str(FIXTURES.parent)],
            "fixtures: is a folder, not a regular file",
        ),
    ],
)
def test_a_directory_given_as_a_file_says_so(capsys, argv, expected):
    assert main(argv) == 2
    (line,) = [e for e in capsys.readouterr().err.splitlines() if not e.startswith("note: ")]
    assert line.startswith("error: ") and line.endswith(expected)


@pytest.mark.parametrize(
    ("qrels", "run", "expected"),
    [
        ("q1 0 d1 0\nq2 0 d2 0\n", "q1 Q0 d1 1 1 t\n", "qrels: no query has a relevant judgment"),
        ("q1 0 d1 -1\n", "q1 Q0 d1 1 1 t\n", "qrels: no query has a relevant judgment"),
        ("q1 0 d1 1\n", "q9 Q0 d1 1 1 t\n", "run: no query of the run is judged in "),
        ("q1 0 d1 1\nq2 0 d1 1\n", "q3 Q0 d1 1 1 t\nq4 Q0 d1 1 1 t\n", "run: no query of the"),
    ],
)
def test_an_empty_evaluation_is_an_error(tmp_path, capsys, qrels, run, expected):
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    assert main(["eval", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "RR"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {tmp_path}/{expected}")
    assert capsys.readouterr().out == ""


def console_script() -> list[str]:
    """The `rageval` command as pyproject declares it, run as pip's generated script runs it
    (the installed script is only regenerated by an install)."""
    import tomllib

    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["rageval"]
    module, function = target.split(":")
    code = f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    return [sys.executable, "-c", code]


def run_command(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, **kwargs)


@pytest.mark.slow
def test_console_script_exits_as_main_returns(tmp_path, capsys):
    # The script exits with main()'s status: same output, same status, nothing lost in a buffer.
    qrels, run = many_queries_run(tmp_path)
    argv = ["eval", qrels, run, "-q", "-m", "RR"]
    assert main(argv) == 0
    expected = capsys.readouterr()
    done = run_command([*console_script(), *argv])
    assert (done.returncode, done.stdout, done.stderr) == (0, expected.out, expected.err)
    bad = run_command([*console_script(), "eval", QRELS, str(FIXTURES / "bad_score.trec")])
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: ") and "bad_score.trec:2: score:" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_console_script_with_stdout_closed_early_exits_quietly(tmp_path, reader):
    qrels, run = many_queries_run(tmp_path)
    command = " ".join(f"'{part}'" for part in [*console_script(), "eval", qrels, run, "-q"])
    done = run_command(["bash", "-o", "pipefail", "-c", f"{command} | {reader}"])
    assert (done.returncode, done.stderr) == (0, "")


def test_bad_qrels_are_reported_before_a_bad_run(capsys):
    # The run is read in a thread while the qrels are read: the qrels' error still comes first.
    argv = ["eval", str(FIXTURES / "bad_fields.qrels"), str(FIXTURES / "bad_score.trec")]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {FIXTURES / 'bad_fields.qrels'}:")


def test_reading_a_run_file_loads_no_pandas_or_pydantic(tmp_path):
    # What lets `rageval eval` read the run while pydantic (0.15 s) and pandas (0.4 s) import:
    # the bytes are read with no pydantic loaded, and the readers' modules and the read-ahead
    # (`delimited.fetch`: bytes and CSV columns) import neither; nor, for a TREC run, Parquet's
    # reader (30 ms of imports, pyarrow.fs and S3 included).
    code = (
        "import sys\n"
        "from rageval_pipeline.core.io.bounds import input_bytes\n"
        "print('pydantic' in sys.modules)\n"
        "from rageval_pipeline.core.io.delimited import fetch\n"
        "from rageval_pipeline.core.io.formats import TREC_RUN, read_ranked_run\n"
        "ahead = fetch(*input_bytes(sys.argv[1]), TREC_RUN)\n"
        "print(ahead.fast is not None, 'pandas' in sys.modules, 'pydantic' in sys.modules)\n"
        "read_ranked_run(ahead)\n"
        "print('pyarrow.parquet' in sys.modules)\n"
    )
    done = run_command([sys.executable, "-c", code, RUN_A], cwd=tmp_path)
    expected = "False\nTrue False False\nFalse\n"
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


def test_console_script_waits_for_a_running_thread(tmp_path):
    # The script's exit waits for a non-daemon thread (an os._exit would kill it mid-way).
    code = (
        "import sys, threading, time\n"
        "from pathlib import Path\n"
        "from rageval_pipeline import cli\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    Path(sys.argv[1]).write_text('done')\n"
        "def main():\n"
        "    threading.Thread(target=late).start()\n"
        "    return 3\n"
        "cli.main = main\n"
        "cli.entry()\n"
    )
    done = run_command([sys.executable, "-c", code, str(tmp_path / "late")])
    assert (done.returncode, done.stderr) == (3, "")
    assert (tmp_path / "late").read_text() == "done"
