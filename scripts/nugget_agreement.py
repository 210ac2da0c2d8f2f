"""A second reader's nugget-level re-reading of a uniform random sample of a suite's judged pairs,
and its agreement with the suite (docs/suite-format.md, "Agreement"). Run from the repository
root with the project's Python; ROUND is the folder `data/suites/<suite>/agreement/round<ROUND>`:

  .venv/bin/python scripts/nugget_agreement.py seed SUITE ROUND [NUGGETS NONE]  # seed.json
  .venv/bin/python scripts/nugget_agreement.py draw SUITE ROUND [READERS_DIR]   # the draw
  .venv/bin/python scripts/nugget_agreement.py compare SUITE ROUND              # the figures

`seed` records a fresh seed with the strata (pairs with a nugget, pairs without), their
population sizes and digests and the sample sizes (default 40 and 20): commit it alone, before
the draw. `draw` draws from it (refusing a population that changed since), writes
`sample.jsonl` (the suite's reading of each drawn pair, not for the reader) and `sheet.jsonl`
(the blind sheet: order, query, target text, empty `grade`, `nuggets`, `why`), and copies the
sheet to READERS_DIR/sheet-<suite>.jsonl. Drawing again from a committed seed writes the same
files. `compare` reads `second.jsonl` (the second reader's sheet) of the round folder.
"""

from __future__ import annotations

import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.curation import draw as drawing  # noqa: E402
from rageval_pipeline.core.curation.sheets import jsonl  # noqa: E402
from rageval_pipeline.core.curation.third import target_text  # noqa: E402
from rageval_pipeline.core.errors import InputError  # noqa: E402
from rageval_pipeline.core.storage.files import write_text  # noqa: E402
from rageval_pipeline.core.suites.golden import Suite, load_suite  # noqa: E402

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
    sample = [{"order": i, **p.model_dump(exclude_none=True)} for i, p in enumerate(drawn, 1)]
    write_text(folder / "sample.jsonl", jsonl(sample))
    sheet = jsonl(sheet_rows(suite, drawn))
    write_text(folder / "sheet.jsonl", sheet)
    if readers is not None:
        write_text(readers / f"sheet-{name}.jsonl", sheet)
    print(f"{folder}: {len(drawn)} pairs drawn (seed {record.seed})")


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
        else:
            print(__doc__)
            return 2
    except (InputError, drawing.DrawError) as error:
        print(f"error: {error.describe() if isinstance(error, InputError) else error}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
