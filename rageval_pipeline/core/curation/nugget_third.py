"""The third reading of a nugget-level round: the blind sheet of its disagreements, and the
decided nuggets turned into the decisions a suite is rebuilt from (`scripts/nugget_judging.py`).

The third reader sees the query, the target's text and the two readings (grade and nuggets) in
an order drawn per row from a recorded seed (`third.swapped`), with nothing naming the suite;
the key stays with the record. A decided pair's nuggets replace the suite's: a nugget of the
suite the decision quotes again (same text) is regraded in place, one whose text holds decided
nuggets is split into them, any other is dropped (read, graded 0), and the decided nuggets left
are quoted as new nuggets of the pair's judged region.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rageval_pipeline.core.curation.draw import Nugget, PairReading
from rageval_pipeline.core.curation.nuggets import Compared
from rageval_pipeline.core.curation.third import swapped
from rageval_pipeline.core.suites.spans import quote_places


def _shown(reading: PairReading) -> dict[str, Any]:
    return {
        "grade": reading.grade,
        "nuggets": [n.model_dump(exclude_none=True) for n in reading.nuggets],
    }


def third_rows(
    pairs: Sequence[Compared], sheet: Mapping[tuple[str, str], dict], seed: int, scope: str
) -> tuple[list[dict], dict[str, str]]:
    """The third reader's rows of the disagreeing pairs and the key: "query|target" -> the
    reading shown as reading_1 ("suite" or "reader"). `sheet`: pair -> its row of the blind
    second-reading sheet (query, title, target text)."""
    rows, key = [], {}
    for order, pair in enumerate((p for p in pairs if p.disagrees), 1):
        q, t = pair.suite.key
        swap = swapped(seed, scope, q, t)
        one, two = (pair.reader, pair.suite) if swap else (pair.suite, pair.reader)
        key[f"{q}|{t}"] = "reader" if swap else "suite"
        given = sheet[q, t]
        rows.append(
            {
                "order": order,
                "query_id": q,
                "query": given["query"],
                "target_id": t,
                "title": given["title"],
                "target_text": given["target_text"],
                "reading_1": _shown(one),
                "reading_2": _shown(two),
                "grade": None,
                "nuggets": [],
                "why": "",
            }
        )
    return rows, key


def _flat(text: str) -> str:
    return " ".join(text.split())


def _entry(nugget: Nugget) -> dict[str, Any]:
    return nugget.model_dump(exclude_none=True)


def decisions(now: PairReading, decided: PairReading, doc: str, why: str) -> list[dict[str, Any]]:
    """The decisions that turn the suite's nuggets of a pair (`now`) into the decided ones,
    in the format `scripts/nugget_judging.py apply` reads; none when they are already so."""
    left = list(decided.nuggets)
    out = []

    def row(span: str | None, nuggets: list[dict[str, Any]]) -> dict[str, Any]:
        return {"query_id": now.query_id, "doc": doc, "span": span, "nuggets": nuggets, "why": why}

    for old in now.nuggets:
        same = [n for n in left if _flat(n.quote) == _flat(old.quote)]
        if same:
            left.remove(same[0])
            if (same[0].grade, same[0].decisive) != (old.grade, old.decisive):
                out.append(row(old.quote, [_entry(same[0])]))
            continue
        inside = [n for n in left if quote_places(old.quote, n.quote)]
        for nugget in inside:
            left.remove(nugget)
        dropped = [{"quote": old.quote, "grade": 0}]
        out.append(row(old.quote, [_entry(n) for n in inside] or dropped))
    if left:
        out.append(row(None, [_entry(n) for n in left]))
    return out
