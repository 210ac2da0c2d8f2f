"""Agreement of the evidence-level re-judging (agreement/round2) over the pairs both readers
actually read: the second pass's random sample meets the first pass only where the first pass
graded the pair, since a pair round 1 graded 0 and the first pass did not name kept its round-1
grade unread. Run from the repository root:

  .venv/bin/python scripts/reread_agreement.py [SUITE...]

The sample was stratified on round-1 grades (20% of pairs graded >= 1, 5% of those graded 0,
the suites' READMEs); the figures below are over the sampled pairs both passes read, so pairs
round 1 graded 0 are under-represented, and the stratification is stated with them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.curation.agreement import figures  # noqa: E402

SUITES = ("techdocs", "hotel")


def grades(path: Path) -> dict[tuple[str, str], int]:
    """(query, target) -> grade; a pair graded again later in the file keeps its last grade."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {(row["query_id"], row["target"]): row["grade"] for row in rows}


def main(names: list[str]) -> int:
    for name in names or SUITES:
        record = ROOT / "data" / "suites" / name / "agreement" / "round2"
        first, second = grades(record / "first_pass.jsonl"), grades(record / "second_pass.jsonl")
        both = sorted(set(first) & set(second))
        found = figures([first[k] for k in both], [second[k] for k in both])
        print(
            f"{name}: {found.pairs} of {len(second)} second-pass pairs read by both; raw "
            f"{found.raw:.3f}, kappa linear {found.kappa_linear:.3f}, quadratic "
            f"{found.kappa_quadratic:.3f}, relevant (>= 1) {found.kappa_relevant:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
