"""The nugget-level re-judging record of a bundled suite (`agreement/nuggets/decisions.jsonl`,
applied by scripts/nugget_judging.py): which (query, document) pairs it graded again."""

from __future__ import annotations

import json
from pathlib import Path


def renugget(suite_dir: Path) -> set[tuple[str, str]]:
    path = suite_dir / "agreement" / "nuggets" / "decisions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {(row["query_id"], row["doc"]) for row in rows if "doc" in row}
