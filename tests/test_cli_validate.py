import subprocess
import sys
from pathlib import Path

import pytest

from rageval_pipeline.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "suites"
TINY = FIXTURES / "tiny"
BAD = FIXTURES / "malformed" / "missing_query.json"
OK_LINE = f"ok: {TINY} (3 documents, 3 queries, 5 judgments)\n"
ERROR_LINE = f"error: {BAD}:16: queries[0].query: field required\n"


def test_valid_suite_exits_0(capsys):
    assert main(["validate", str(TINY)]) == 0
    assert capsys.readouterr() == (OK_LINE, "")


def test_every_bundled_suite_validates(capsys):
    """A judging step (a third reading, a pooled search) can leave near-duplicates graded apart;
    validation is the check that catches it, so the shipped suites must pass it."""
    bundled = sorted(
        p.parent for p in (Path(__file__).parents[1] / "data" / "suites").glob("*/suite.json")
    )
    assert main(["validate", *map(str, bundled)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.count("ok: ") == len(bundled) >= 2


def test_invalid_suite_exits_2_and_later_paths_are_still_checked(capsys):
    assert main(["validate", str(BAD), str(TINY)]) == 2
    assert capsys.readouterr() == (OK_LINE, ERROR_LINE)


@pytest.mark.slow
def test_installed_command():
    rageval = Path(sys.executable).with_name("rageval")
    done = subprocess.run(
        [str(rageval), "validate", str(TINY), str(BAD)], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, OK_LINE, ERROR_LINE)


def test_systems_and_gate_files_are_validated_by_name(tmp_path, capsys):
    repo = Path(__file__).parent.parent / "data"
    bad = tmp_path / "gate.yaml"
    bad.write_text("version: 1\ndatasets:\n  default:\n    thresholds: {nDGC@10: 0.3}\n")
    assert main(["validate", str(repo / "systems.yaml"), str(repo / "gate.yaml"), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith(f"ok: {repo / 'systems.yaml'} (")
    assert out.splitlines()[0].endswith(" system(s))")
    assert out.splitlines()[1].startswith(f"ok: {repo / 'gate.yaml'} (gate policy, ")
    assert err == (
        f'error: {bad}:4: datasets["default"].thresholds["nDGC@10"]: unknown measure '
        '"nDGC@10" (known: P, R, F1, RR, nDCG, AP, Success, Rprec, Judged, ER, Diversity, '
        "Clustering, EvidenceRecall, TokenPrecision, TokenIoU, Tokens)\n"
    )


def test_a_missing_path_is_one_line_whatever_its_name(tmp_path):
    """Not "unknown file type": the path is not there, so nothing about its kind is known."""
    rageval = Path(sys.executable).with_name("rageval")
    missing = [tmp_path / "suite", tmp_path / "gate.yaml", tmp_path / "suite.json"]
    done = subprocess.run(
        [str(rageval), "validate", *map(str, missing), str(TINY)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, OK_LINE)
    assert done.stderr == "".join(f"error: {p}: no such file or folder\n" for p in missing)
