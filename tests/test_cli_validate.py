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
