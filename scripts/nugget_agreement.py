"""A second reader's nugget-level re-reading of a uniform random sample of a suite's judged pairs,
and its agreement with the suite (docs/suite-format.md, "Agreement"). Run from the repository
root with the project's Python; ROUND is the folder `data/suites/<suite>/agreement/round<ROUND>`:

  .venv/bin/python scripts/nugget_agreement.py seed SUITE ROUND [NUGGETS NONE]  # seed.json
  .venv/bin/python scripts/nugget_agreement.py draw SUITE ROUND [READERS_DIR]   # the draw
  .venv/bin/python scripts/nugget_agreement.py compare SUITE ROUND [SECOND]     # the figures
  .venv/bin/python scripts/nugget_agreement.py third SUITE ROUND [READERS_DIR]  # third sheet
  .venv/bin/python scripts/nugget_agreement.py apply-third SUITE ROUND [DECIDED]

`seed` records a fresh seed with the strata (pairs with a nugget, pairs without), their
population sizes and digests and the sample sizes (default 40 and 20): commit it alone, before
the draw. `draw` draws from it (refusing a population that changed since), writes
`sample.jsonl` (the suite's reading of each drawn pair, not for the reader) and `sheet.jsonl`
(the blind sheet: order, query, target text, empty `grade`, `nuggets`, `why`), and copies the
sheet to READERS_DIR/sheet-<suite>.jsonl. Drawing again from a committed seed writes the same
files.

`compare` copies SECOND (the second reader's filled sheet) into the round folder as
`second.jsonl` when given, and compares the pairs it read with the suite's readings of the
draw: `agreement.json` and `agreement.md`, reproduced from the committed record by the same
command without SECOND. `third` writes the blind sheet of the disagreements (`third.jsonl`,
copied to READERS_DIR/third-<suite>.jsonl) and its key (`third_key.json`, its seed drawn once
and kept). `apply-third` copies DECIDED (the third reader's filled sheet) as
`third_decided.jsonl`, appends the decisions that give each decided pair the decided nuggets to
`agreement/nuggets/decisions.jsonl` (a line already there is not repeated) and applies them
(`scripts/nugget_judging.py apply`).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.curation import draw as drawing  # noqa: E402
from rageval_pipeline.core.curation import nugget_third, nuggets  # noqa: E402
from rageval_pipeline.core.curation.sheets import jsonl  # noqa: E402
from rageval_pipeline.core.curation.third import target_text  # noqa: E402
from rageval_pipeline.core.errors import InputError  # noqa: E402
from rageval_pipeline.core.storage.files import write_text  # noqa: E402
from rageval_pipeline.core.suites.golden import Suite, load_suite  # noqa: E402
from rageval_pipeline.core.suites.loaders import jsonl_rows  # noqa: E402

UNIT = (
    "a judged (query, target) pair: one judged region of the query (a reference section, or a "
    "whole document judged as one entity) with the nuggets inside it"
)


def round_folder(name: str, number: str) -> Path:
    return ROOT / "data" / "suites" / name / "agreement" / f"round{number}"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seed(name: str, number: str, nuggets: int = 40, none: int = 20) -> None:
    folder = round_folder(name, number)
    if (folder / "seed.json").exists():
        raise SystemExit(f"{folder / 'seed.json'} exists: a seed is recorded once")
    pairs = drawing.suite_readings(load_suite(ROOT / "data" / "suites" / name))
    record = drawing.SeedRecord(
        suite=name,
        seed=secrets.randbits(32),
        unit=UNIT,
        strata=drawing.strata(pairs, {drawing.NUGGETS: nuggets, drawing.NONE: none}),
        recorded_at=now(),
    )
    write_text(folder / "seed.json", record.model_dump_json(indent=2) + "\n")
    print(f"{folder / 'seed.json'}: seed {record.seed}, {dict(record.strata)}")


def sheet_rows(suite: Suite, drawn: list[drawing.PairReading]) -> list[dict]:
    """The blind sheet: what the reader reads, and nothing of the suite's reading."""
    queries = {q.id: q.query for q in suite.queries}
    titles = {d.id: d.title for d in suite.documents}
    rows = []
    for order, pair in enumerate(drawn, 1):
        doc = suite.reference.extent_of(pair.target_id).doc_id
        rows.append(
            {
                "order": order,
                "query_id": pair.query_id,
                "query": queries[pair.query_id],
                "target_id": pair.target_id,
                "title": titles[doc],
                "target_text": target_text(suite, pair.target_id),
                "grade": None,
                "nuggets": [],
                "why": "",
            }
        )
    return rows


def draw(name: str, number: str, readers: Path | None = None) -> None:
    folder = round_folder(name, number)
    record = drawing.SeedRecord.model_validate_json((folder / "seed.json").read_text())
    suite = load_suite(ROOT / "data" / "suites" / name)
    drawn = drawing.draw(drawing.suite_readings(suite), record)
    if record.drawn_at is None:
        record.drawn_at = now()
        write_text(folder / "seed.json", record.model_dump_json(indent=2) + "\n")
    sample = [
        {"order": i, **p.model_dump(exclude_none=True, exclude={"why"})}
        for i, p in enumerate(drawn, 1)
    ]
    write_text(folder / "sample.jsonl", jsonl(sample))
    sheet = jsonl(sheet_rows(suite, drawn))
    write_text(folder / "sheet.jsonl", sheet)
    if readers is not None:
        write_text(readers / f"sheet-{name}.jsonl", sheet)
    print(f"{folder}: {len(drawn)} pairs drawn (seed {record.seed})")


def rows_of(path: Path) -> list[dict]:
    return [row for _, row in jsonl_rows(path, "file_bytes")]


def compared(name: str, number: str) -> tuple[list[nuggets.Compared], drawing.SeedRecord]:
    """The drawn pairs the second reader read, each compared with the suite's reading."""
    folder = round_folder(name, number)
    record = drawing.SeedRecord.model_validate_json((folder / "seed.json").read_text())
    sample = [drawing.PairReading.model_validate(r) for r in rows_of(folder / "sample.jsonl")]
    texts = {
        (r["query_id"], r["target_id"]): r["target_text"] for r in rows_of(folder / "sheet.jsonl")
    }
    second = nuggets.read_readings(folder / "second.jsonl", texts, full=False)
    return [
        nuggets.compare_pair(texts[p.key], p.stratum, p, second[p.key])
        for p in sample
        if p.key in second
    ], record


def markdown(name: str, number: str, record: drawing.SeedRecord, found: nuggets.Agreement) -> str:
    """agreement.md: the draw, then the figures' table."""
    head = [
        f"# {name}, round {number}: a second reader's nugget-level re-reading",
        "",
        f"Seed {record.seed} (recorded {record.recorded_at}, drawn {record.drawn_at}); "
        f"pairs read by both: {found.pairs_read}.",
        "",
    ]
    return "\n".join(head + nuggets.table(found))


def compare(name: str, number: str, second: Path | None = None) -> None:
    folder = round_folder(name, number)
    if second is not None:
        write_text(folder / "second.jsonl", second.read_text(encoding="utf-8"))
    pairs, record = compared(name, number)
    population = {k: s.population for k, s in record.strata.items()}
    drawn = {k: s.sample for k, s in record.strata.items()}
    found = nuggets.agreement(pairs, population, drawn)
    write_text(folder / "agreement.json", found.model_dump_json(indent=1) + "\n")
    write_text(folder / "agreement.md", markdown(name, number, record, found))
    print(markdown(name, number, record, found))


def third(name: str, number: str, readers: Path | None = None) -> None:
    folder = round_folder(name, number)
    key_file = folder / "third_key.json"
    seed = json.loads(key_file.read_text())["seed"] if key_file.exists() else secrets.randbits(32)
    pairs, _ = compared(name, number)
    sheet = {(r["query_id"], r["target_id"]): r for r in rows_of(folder / "sheet.jsonl")}
    rows, key = nugget_third.third_rows(pairs, sheet, seed, name)
    note = "reading_1 of each row is the reading named here (suite, or the second reader)"
    keep = {"seed": seed, "scope": name, "reading_1": key, "note": note}
    write_text(key_file, json.dumps(keep, indent=1) + "\n")
    text = jsonl(rows)
    write_text(folder / "third.jsonl", text)
    if readers is not None:
        write_text(readers / f"third-{name}.jsonl", text)
    print(f"{folder / 'third.jsonl'}: {len(rows)} disagreements for the third reading")


def apply_third(name: str, number: str, decided_file: Path | None = None) -> None:
    folder = round_folder(name, number)
    if decided_file is not None:
        write_text(folder / "third_decided.jsonl", decided_file.read_text(encoding="utf-8"))
    texts = {
        (r["query_id"], r["target_id"]): r["target_text"] for r in rows_of(folder / "third.jsonl")
    }
    decided = nuggets.read_readings(folder / "third_decided.jsonl", texts)
    suite = load_suite(ROOT / "data" / "suites" / name)
    now = {p.key: p for p in drawing.suite_readings(suite)}
    lines = []
    for key, reading in decided.items():
        if key not in now:
            raise SystemExit(f"error: {key[0]} {key[1]} is no longer a judged pair of {name}")
        doc = suite.reference.extent_of(key[1]).doc_id
        why = f"third reading of round {number}: {reading.why}".strip()
        lines += nugget_third.decisions(now[key], reading, doc, why)
    path = ROOT / "data" / "suites" / name / "agreement" / "nuggets" / "decisions.jsonl"
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    known = set(before.splitlines())
    new = [line for line in jsonl(lines).splitlines() if line not in known]
    if before and not before.endswith("\n"):
        before += "\n"
    write_text(path, before + "".join(line + "\n" for line in new))
    print(f"{path}: {len(new)} decisions appended")
    script = ROOT / "scripts" / "nugget_judging.py"
    subprocess.run([sys.executable, str(script), "apply", name], check=True)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    command, name, number, *rest = argv
    try:
        if command == "seed":
            seed(name, number, *map(int, rest))
        elif command == "draw":
            draw(name, number, Path(rest[0]) if rest else None)
        elif command == "compare":
            compare(name, number, Path(rest[0]) if rest else None)
        elif command == "third":
            third(name, number, Path(rest[0]) if rest else None)
        elif command == "apply-third":
            apply_third(name, number, Path(rest[0]) if rest else None)
        else:
            print(__doc__)
            return 2
    except (InputError, drawing.DrawError) as error:
        print(f"error: {error.describe() if isinstance(error, InputError) else error}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
