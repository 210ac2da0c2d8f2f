"""The evidence-level re-judging of techdocs and hotel (issue 33), from the judges' files to
the suites: agreement, the blind sheet of disagreements for the third reader, the record, the
rebuilt suites. Run from the repository root with the project's Python:

  .venv/bin/python scripts/evidence_judging.py blind JUDGING      # third reader's sheets
  .venv/bin/python scripts/evidence_judging.py record JUDGING     # data/suites/*/agreement/round2
  .venv/bin/python scripts/evidence_judging.py build              # data/suites/*/suite.json

JUDGING is the judges' folder: `<suite>_first*.jsonl` (first pass), `second_<suite>.jsonl`
(second pass on the random sample `<suite>_sample.jsonl`, drawn with the seed in
`.<suite>_sample_meta.json`), `third_reading.jsonl` (the third reading of each disagreement),
`requotes.jsonl` (first-pass rows the third reader re-quoted). `record`, run once on the suites
of round 1, copies what the suite needs into `data/suites/<suite>/agreement/round2/` with the
agreement and each changed grade; `build` reads only that folder (plus `consistency.jsonl`,
written there by hand: a near-duplicate given the grade the third reading decided for its
twin) and the suite, so the suites are rebuilt from the repository alone, and rebuilding a
rebuilt suite changes nothing.
Works on partial files (judging in progress): pairs one pass has not read yet are left out.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.curation import judging, readings, sheets, third  # noqa: E402
from rageval_pipeline.core.curation.readings import Reading  # noqa: E402
from rageval_pipeline.core.curation.third import target_text  # noqa: E402
from rageval_pipeline.core.io.chunk_ids import chunk_id  # noqa: E402
from rageval_pipeline.core.storage.files import write_text  # noqa: E402
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


def passes(judging: Path, suite: Suite) -> tuple[list[Reading], list[Reading], list[Reading]]:
    """(first pass, second pass, third readings of this suite) as far as they are written."""
    name = suite.name
    first = [r for f in sorted(judging.glob(f"{name}_first*.jsonl")) for r in readings.read_pass(f)]
    second_file = judging / f"second_{name}.jsonl"
    second = readings.read_pass(second_file) if second_file.exists() else []
    third_file = judging / "third_reading.jsonl"
    third = readings.read_pass(third_file) if third_file.exists() else []
    targets = targets_of(suite)
    return first, second, [r for r in third if r.target in targets]


def targets_of(suite: Suite) -> set[str]:
    """The ids the judges graded: sections (reference chunks) for techdocs, entities for hotel."""
    if suite.name == "hotel":
        return set(suite.reference.texts)
    return {
        chunk_id(d, n) for d, count in suite.reference.chunk_counts.items() for n in range(count)
    }


def first_readings(first: list[Reading], sample: list[dict]) -> dict[tuple[str, str], Reading]:
    """The first pass's reading of every pair it read, plus the kept grade 0 of a sampled
    pair graded 0 before that it did not name. A pair graded >= 1 before that it has not read
    yet has no reading."""
    out = {r.key: r for r in first}
    for row in sample:
        key = (row["query_id"], row["target"])
        if key not in out and row["grade_before"] == 0:
            out[key] = Reading(
                query_id=key[0],
                target=key[1],
                grade=0,
                note="graded 0 before, not named by the first pass: kept",
                judge=KEPT_ZERO,
            )
    return out


def compare(
    suite: Suite, first: list[Reading], second: list[Reading], sample: list[dict]
) -> readings.RoundReport:
    known = first_readings(first, sample)
    drawn = {(row["query_id"], row["target"]) for row in sample}
    read = [r for r in second if r.key in known and r.key in drawn]
    texts = {r.target: target_text(suite, r.target) for r in read}
    return readings.compare_passes(known, read, texts)


def drawn_sample(judging: Path, suite: Suite) -> list[dict]:
    """The sampled pairs, each with its grade before the re-judging."""
    grades = old_grades(suite)
    rows = map(json.loads, (judging / f"{suite.name}_sample.jsonl").read_text().splitlines())
    return [
        {
            "query_id": r["query_id"],
            "target": r["target"],
            "grade_before": grades[r["query_id"], r["target"]],
        }
        for r in rows
    ]


def blind(judging: Path) -> None:
    """Write disagreements_<suite>.jsonl for the third reader (the two readings in an order
    drawn per row, `rageval pool agree --third-sheet`'s sheet) and .disagreements_key.json
    (which reading is which), into JUDGING."""
    key: dict[str, dict[str, str]] = {}
    for name in SUITES:
        suite = suite_of(name)
        first, second, _ = passes(judging, suite)
        report = compare(suite, first, second, drawn_sample(judging, suite))
        rows, key[name] = third.blind_rows(suite, report.disagreements, BLIND_SEED)
        sheets.write_rows(rows, judging / f"disagreements_{name}.jsonl", third.COLUMNS)
        print(f"{name}: {len(rows)} disagreements of {report.pairs} pairs read by both")
    note = "reading_1 is the pass named here (first or second); reading_2 the other"
    write_text(
        judging / ".disagreements_key.json",
        json.dumps({"seed": BLIND_SEED, "reading_1": key, "note": note}, indent=1) + "\n",
    )


def record(judging: Path) -> None:
    """Copy the passes into data/suites/<suite>/agreement/round2/ and write the agreement, the
    disagreements with both readings and the third reading's decision, and the independence
    record (each pass's judges, first and last graded_at, order)."""
    key = json.loads((judging / ".disagreements_key.json").read_text())["reading_1"]
    requoted = readings.read_pass(judging / "requotes.jsonl")
    for name in SUITES:
        suite = suite_of(name)
        if any(
            len(q.spans) > len(q.qrels) or (q.spans and name == "hotel") for q in suite.queries
        ):  # before anything is written: the record is of round 1's grades
            raise SystemExit(f"{name}: already rebuilt; record reads the judgments of round 1")
        folder = ROOT / "data" / "suites" / name / "agreement" / "round2"
        folder.mkdir(parents=True, exist_ok=True)
        first, second, third = passes(judging, suite)
        sample = drawn_sample(judging, suite)
        for reading in third:  # which pass the third reader agreed with, from the key
            one = key.get(name, {}).get(f"{reading.query_id}|{reading.target}")
            other = {"first": "second", "second": "first"}.get(one)
            reading.chose = {"reading_1": one, "reading_2": other}.get(
                reading.chose or "", "neither"
            )
        write_text(folder / "first_pass.jsonl", sheets.jsonl(first))
        write_text(folder / "second_pass.jsonl", sheets.jsonl(second))
        write_text(folder / "third_reading.jsonl", sheets.jsonl(third))
        mine = targets_of(suite)
        write_text(folder / "requotes.jsonl", sheets.jsonl(r for r in requoted if r.target in mine))
        write_text(folder / "sample.jsonl", sheets.jsonl(sample))
        meta = json.loads((judging / f".{name}_sample_meta.json").read_text())
        summarize(suite, folder, meta)
        write_text(folder / "changes.jsonl", sheets.jsonl(changes(suite, folder)))


def changes(suite: Suite, folder: Path) -> list[dict]:
    """Each (query, target) whose grade the re-judging changed, or that it judged for the first
    time: grade before, grade after, the reading that decided it and its note (of a suite
    of round 1: `record` checks)."""
    before = old_grades(suite)
    decided = final_readings(folder)
    out = []
    for key, reading in decided.items():
        if before.get(key) != reading.grade:
            out.append(
                {
                    "query_id": key[0],
                    "target": key[1],
                    "before": before.get(key),
                    "after": reading.grade,
                    "decided_by": reading.judge,
                    "note": reading.note,
                }
            )
    return out


def final_readings(folder: Path) -> dict[tuple[str, str], Reading]:
    """The reading that decides each pair: the first pass's, replaced by a re-quoted row, by the
    third reading of a disagreement, and by the consistency rule, in that order."""
    return {
        r.key: r
        for part in ("first_pass", "requotes", "third_reading", "consistency")
        if (folder / f"{part}.jsonl").exists()
        for r in readings.read_pass(folder / f"{part}.jsonl")
    }


def summarize(suite: Suite, folder: Path, meta: dict) -> dict:
    """agreement.json and disagreements.jsonl of a round2 folder, from its files alone."""
    first, second, third = (
        readings.read_pass(folder / f"{part}.jsonl")
        for part in ("first_pass", "second_pass", "third_reading")
    )
    sample = [json.loads(line) for line in (folder / "sample.jsonl").read_text().splitlines()]
    report = compare(suite, first, second, sample)
    decided = {r.key: r for r in third}
    queries = {q.id: q.query for q in suite.queries}
    rows = [
        {
            "query_id": p.query_id,
            "query": queries[p.query_id],
            "target": p.target,
            "first": _reading(p.first),
            "second": _reading(p.second),
            "evidence_f1": p.evidence_f1,
            "third": _reading(decided[p.query_id, p.target])
            if (p.query_id, p.target) in decided
            else None,
        }
        for p in report.disagreements
    ]
    write_text(folder / "disagreements.jsonl", sheets.jsonl(rows))
    figures = report.model_dump(exclude={"compared"}) | {
        "raw": report.raw,
        "disagreements": len(rows),
        "decided_by_third_reading": sum(r["third"] is not None for r in rows),
    }
    summary = {
        "sample": meta,
        "agreement": figures,
        "independence": {
            "first_pass": [s.model_dump() for s in readings.stamps(first)],
            "second_pass": [s.model_dump() for s in readings.stamps(second)],
            "third_reading": [s.model_dump() for s in readings.stamps(third)],
        },
    }
    write_text(folder / "agreement.json", json.dumps(summary, indent=1) + "\n")
    print(f"{suite.name}: {json.dumps(figures)}")
    return summary


def _reading(r: Reading) -> dict:
    out = {"grade": r.grade, "evidence": r.evidence, "judge": r.judge, "note": r.note}
    return out | ({"chose": r.chose} if r.chose else {})


def final_sheet(suite: Suite, folder: Path) -> list[dict]:
    """The merge sheet of the final judgments: every target the suite judges and every new one,
    graded by the first pass (five of its rows re-quoted by the third reader, `requotes`: their
    quotes broke the evidence rule), or by the third reading where the passes disagreed (and a
    near-duplicate of a target it decided by the same grade: `consistency`, the suite's rule); a
    target the first pass did not name keeps its grade (0), without evidence. A query's rows
    start with its old primary target when that keeps the highest grade, so the primary stays
    there."""
    final = final_readings(folder)
    before = old_grades(suite)
    rows = []
    for query in suite.queries:
        keys = [k for k in before if k[0] == query.id]
        keys += [k for k in final if k[0] == query.id and k not in before]
        mine = []
        for _, target in keys:
            reading = final.get((query.id, target))
            grade = before[query.id, target] if reading is None else reading.grade
            evidence = [] if reading is None else reading.evidence
            mine.append(
                {"query_id": query.id, "target_id": target, "grade": grade, "evidence": evidence}
            )
        best = max((row["grade"] for row in mine), default=0)
        old = old_primary(suite, query)
        mine.sort(key=lambda row: row["target_id"] != old or row["grade"] != best)
        rows += mine
    return rows


def old_primary(suite: Suite, query) -> str | None:
    if suite.name == "hotel" and query.spans:
        marked = [i for i, s in enumerate(query.spans) if s.primary]
        return query.evidence[marked[0]][0].doc_id if marked else None
    return query.primary_id


def build(name: str) -> None:
    """Rebuild data/suites/<name>/suite.json from its agreement/round2 record: the queries'
    judgments cleared, the final sheet merged by `rageval pool merge`'s own function (quotes
    located in each target's text), the result validated, then written atomically."""
    folder = ROOT / "data" / "suites" / name
    suite = suite_of(name)
    rows = final_sheet(suite, folder / "agreement" / "round2")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("agreement"))
        file = copy / "suite.json"
        raw = json.loads(file.read_text(encoding="utf-8"))
        for query in raw["queries"]:
            for field in ("judgments", "spans", "primary", "top_1_chunk", "top_1_span"):
                query.pop(field, None)
        file.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        sheet = Path(tmp) / "final.jsonl"
        sheet.write_text(sheets.jsonl(rows), encoding="utf-8")
        result = judging.merge_sheet(file, sheet)
        if result.inconsistent or result.conflicts:
            raise SystemExit("\n".join(result.inconsistent) or "conflicts")
        write_text(folder / "suite.json", file.read_text(encoding="utf-8"))
    graded = [r["grade"] for r in rows]
    counts = {g: graded.count(g) for g in range(4)}
    quotes = sum(len(r["evidence"]) for r in rows)
    print(f"{name}: {len(rows)} judged targets {counts}, {quotes} evidence spans")


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "blind":
        blind(Path(rest[0]))
    elif command == "record":
        record(Path(rest[0]))
    elif command == "build":
        for name in rest or SUITES:
            build(name)
    else:
        raise SystemExit(f"unknown command {command!r}: blind, record or build")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
