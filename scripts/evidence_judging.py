"""The evidence-level re-judging of techdocs and hotel (issue 33), from the judges' files to
the suites: agreement, the blind sheet of disagreements for the third reader, the record, the
rebuilt suites. Run from the repository root with the project's Python:

  .venv/bin/python scripts/evidence_judging.py blind JUDGING      # third reader's sheets
  .venv/bin/python scripts/evidence_judging.py record JUDGING     # data/suites/*/agreement/round2
  .venv/bin/python scripts/evidence_judging.py build              # data/suites/*/suite.json

JUDGING is the judges' folder: `<suite>_first*.jsonl` (first pass), `second_<suite>.jsonl`
(second pass on the random sample `<suite>_sample.jsonl`, drawn with the seed in
`.<suite>_sample_meta.json`), `third_reading.jsonl` (the third reading of each disagreement).
`record` copies what the suite needs into `data/suites/<suite>/agreement/round2/`; `build`
reads only that folder and the suite, so the suites are rebuilt from the repository alone.
Works on partial files (judging in progress): pairs one pass has not read yet are left out.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.curation import readings  # noqa: E402
from rageval_pipeline.core.curation.readings import Reading  # noqa: E402
from rageval_pipeline.core.storage.warehouse import write_text  # noqa: E402
from rageval_pipeline.core.suites.golden import Suite, load_suite  # noqa: E402

SUITES = ("techdocs", "hotel")
# The order of the two readings on the third reader's sheet is drawn per row from this seed
# and the pair, so a sheet written again (more rows) keeps each row's order.
BLIND_SEED = 33
# The first pass re-graded only the targets the suite graded >= 1 (and new ones it found): a
# sampled target graded 0 before and not named by it keeps that grade, without evidence.
KEPT_ZERO = "issue-11"


def suite_of(name: str) -> Suite:
    return load_suite(ROOT / "data" / "suites" / name)


def target_text(suite: Suite, target: str) -> str:
    doc, start, end, _ = suite.reference.extent_of(target)
    return suite.reference.texts[doc][start:end]


def old_grades(suite: Suite) -> dict[tuple[str, str], int]:
    """(query, target) -> the grade before the re-judging: sections for techdocs, entities for
    hotel (the judged targets of the judges' files)."""
    out = {}
    for query in suite.queries:
        if query.judgments or suite.name == "techdocs":
            out |= {(query.id, target): grade for target, grade in query.qrels}
        else:  # an entity judged by spans: its region's document
            for index, span in enumerate(query.spans):
                doc = query.evidence[index][0].doc_id
                out[(query.id, doc)] = max(out.get((query.id, doc), 0), span.grade)
    return out


def passes(judging: Path, name: str) -> tuple[list[Reading], list[Reading], list[Reading]]:
    """(first pass, second pass, third readings of this suite) as far as they are written."""
    first = [r for f in sorted(judging.glob(f"{name}_first*.jsonl")) for r in readings.read_pass(f)]
    second_file = judging / f"second_{name}.jsonl"
    second = readings.read_pass(second_file) if second_file.exists() else []
    third_file = judging / "third_reading.jsonl"
    third = readings.read_pass(third_file) if third_file.exists() else []
    texts = {t for t in _targets(name)}
    return first, second, [r for r in third if r.target in texts]


def _targets(name: str) -> set[str]:
    suite = suite_of(name)
    if name == "hotel":
        return set(suite.reference.texts)
    return {
        f"{doc}:chunk:{n}" for doc, ext in suite.reference.extents.items() for n in range(len(ext))
    }


def first_readings(
    suite: Suite, first: list[Reading], sample: list[tuple[str, str]]
) -> dict[tuple[str, str], Reading]:
    """The first pass's reading of every pair it read, plus the kept grade 0 of a sampled
    pair graded 0 before that it did not name. A pair graded >= 1 before that it has not read
    yet has no reading."""
    out = {r.key: r for r in first}
    grades = old_grades(suite)
    for key in sample:
        if key not in out and grades.get(key) == 0:
            out[key] = Reading(
                query_id=key[0],
                target=key[1],
                grade=0,
                note="graded 0 before, not named by the first pass: kept",
                judge=KEPT_ZERO,
            )
    return out


def compare(judging: Path, name: str) -> tuple[Suite, readings.RoundReport, list[Reading]]:
    suite = suite_of(name)
    first, second, third = passes(judging, name)
    sample = [
        (row["query_id"], row["target"])
        for row in map(json.loads, (judging / f"{name}_sample.jsonl").read_text().splitlines())
    ]
    known = first_readings(suite, first, sample)
    drawn = set(sample)
    read = [r for r in second if r.key in known and r.key in drawn]
    texts = {r.target: target_text(suite, r.target) for r in read}
    return suite, readings.compare_passes(known, read, texts), third


def blind(judging: Path) -> None:
    """Write disagreements_<suite>.jsonl for the third reader (the two readings in an order
    drawn per row) and .disagreements_key.json (which reading is which), into JUDGING."""
    key: dict[str, dict[str, str]] = {}
    for name in SUITES:
        suite, report, _ = compare(judging, name)
        queries = {q.id: q.query for q in suite.queries}
        rows, key[name] = [], {}
        for pair in report.disagreements:
            swap = random.Random(f"{BLIND_SEED}:{name}:{pair.query_id}:{pair.target}").random()
            one, two = (pair.second, pair.first) if swap < 0.5 else (pair.first, pair.second)
            key[name][f"{pair.query_id}|{pair.target}"] = "second" if swap < 0.5 else "first"
            rows.append(
                {
                    "query_id": pair.query_id,
                    "query": queries[pair.query_id],
                    "target": pair.target,
                    "target_text": target_text(suite, pair.target),
                    "reading_1": {"grade": one.grade, "evidence": one.evidence},
                    "reading_2": {"grade": two.grade, "evidence": two.evidence},
                }
            )
        write_text(judging / f"disagreements_{name}.jsonl", readings.jsonl(rows))
        print(f"{name}: {len(rows)} disagreements of {report.pairs} pairs read by both")
    note = "reading_1 is the pass named here (first or second); reading_2 the other"
    write_text(
        judging / ".disagreements_key.json",
        json.dumps({"seed": BLIND_SEED, "reading_1": key, "note": note}, indent=1) + "\n",
    )


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "blind":
        blind(Path(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}: blind, record or build")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
