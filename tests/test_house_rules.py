"""The product's code and what it shows describe it as it is: no `issue N` or `seed 00x` history
(where a reason is a decision, docs/ says it)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rageval_pipeline"
HISTORY = re.compile(r"issue [0-9]+|seed 00[0-9]", re.IGNORECASE)


def test_no_issue_or_seed_numbers_in_the_package():
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert found == []
