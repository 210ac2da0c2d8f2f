"""The nugget-level re-judging of techdocs and hotel: each evidence span graded on its own by how
much of the answer it carries (docs/suite-format.md, "Nuggets"), recorded as decisions the
suites are rebuilt from. Run from the repository root with the project's Python:

  .venv/bin/python scripts/nugget_judging.py list SUITE [QUERY...]   # what the judge reads
  .venv/bin/python scripts/nugget_judging.py apply [SUITE...]        # decisions -> suite.json

`list` prints each query and its nuggets (document, grade, decisive words, text) and nothing a
system produced. `apply` reads `data/suites/<suite>/agreement/nuggets/decisions.jsonl`, one
decision a line:

  {"query_id": "q048", "doc": "...", "span": "<a nugget's text as it is now>" | null,
   "nuggets": [{"quote": "...", "grade": 3, "decisive": "..."}], "region": "document" | "section",
   "why": "the rubric's reason"}

A decision with `span` replaces that nugget by `nuggets`, each quoted inside it (grade 0: the
text stays read, with no evidence); one with `span: null` quotes new nuggets inside the query's
judged region of that document (an answer left unquoted) or, with `region`, judges a target
the query had not (a missed one: the whole document, or the reference section holding the
quote, as its region). `{"query_id": ..., "primary": "<quote>"}` marks the primary nugget;
`{"query_id": ..., "dropped": "<why>"}` records a query taken out of the suite, whose decisions
stay in the record and are skipped;
otherwise a primary that is no longer of the highest grade moves to the first nugget that is.
Applying again changes nothing: a decision whose nuggets are in place (or were split further
by a later decision that is) is skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rageval_pipeline.core.curation.rewrite import rewrite_suite  # noqa: E402
from rageval_pipeline.core.errors import InputError  # noqa: E402
from rageval_pipeline.core.suites.evidence import Evidence, span_entry  # noqa: E402
from rageval_pipeline.core.suites.golden import Suite, load_suite  # noqa: E402
from rageval_pipeline.core.suites.spans import QuoteError, locate_quote, span_sha256  # noqa: E402

SUITES = ("techdocs", "hotel")


def folder(name: str) -> Path:
    return ROOT / "data" / "suites" / name


def flat(text: str) -> str:
    return " ".join(text.split())


def list_nuggets(name: str, only: list[str]) -> None:
    suite = load_suite(folder(name))
    texts = suite.reference.texts
    for query in suite.queries:
        if only and query.id not in only:
            continue
        print(f"\n{query.id} [{query.query_type}] {query.query}")
        for index, span in enumerate(query.spans):
            if span.grade == 0:
                continue
            evidence = query.evidence[index][0]
            key = f" decisive={span.decisive!r}" if span.decisive else ""
            mark = " *" if span.primary else ""
            text = flat(texts[evidence.doc_id][evidence.start : evidence.end])
            print(f"  [{index}] {evidence.doc_id} g{span.grade}{mark}{key}: {text}")


def read_decisions(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if not path.exists():
        return []
    rows = []
    for line, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.strip():
            rows.append((line, json.loads(raw)))
    return rows


class Apply:
    """Decisions applied to the raw queries of one suite."""

    def __init__(self, suite: Suite, path: Path) -> None:
        self.suite, self.path = suite, path
        self.texts = suite.reference.texts
        self.applied = 0

    def where(self, raw_span: dict[str, Any]) -> tuple[str, int, int]:
        return raw_span["doc"], raw_span["start"], raw_span["end"]

    def entry(self, doc: str, start: int, end: int, grade: int, **extra: Any) -> dict[str, Any]:
        sha = span_sha256(self.texts[doc], start, end)
        return span_entry(Evidence(doc, start, end, sha), grade=grade, **extra)

    def locate(self, doc: str, quote: str, start: int, end: int, line: int) -> tuple[int, int]:
        try:
            return locate_quote(self.texts[doc], quote, start, end)
        except QuoteError as error:
            raise InputError(self.path, f"{error} of {doc} {start}-{end}", line=line) from None

    def nugget_entries(
        self, doc: str, bounds: tuple[int, int], nuggets: list[dict], line: int
    ) -> list[dict[str, Any]]:
        out = []
        for nugget in nuggets:
            start, end = self.locate(doc, nugget["quote"], *bounds, line)
            if nugget["grade"] == 0:
                continue  # read, and no evidence: the region says so
            extra = {"decisive": nugget["decisive"]} if nugget.get("decisive") else {}
            out.append(self.entry(doc, start, end, nugget["grade"], **extra))
        return out

    def __call__(self, raw_queries: dict[str, dict[str, Any]]) -> None:
        primaries: dict[str, str] = {}
        self.rows = read_decisions(self.path)
        # A query taken out of the suite keeps its decisions in the record (they were made on
        # it); a `dropped` line says so, and they are skipped rather than refused as unknown.
        dropped = {row["query_id"] for _, row in self.rows if "dropped" in row}
        for at, (line, row) in enumerate(self.rows):
            if row["query_id"] in dropped and row["query_id"] not in raw_queries:
                continue
            query = raw_queries.get(row["query_id"])
            if query is None:
                raise InputError(self.path, f"unknown query {row['query_id']!r}", line=line)
            if "dropped" in row:
                raise InputError(
                    self.path,
                    f"query {row['query_id']!r} is dropped but still in the suite",
                    line=line,
                )
            if "primary" in row:
                primaries[row["query_id"]] = row["primary"]
                continue
            self.decide(query, row, line, at)
        for query in raw_queries.values():
            if query.get("spans"):
                self.mark_primary(query, primaries.get(query["id"]))

    def decide(self, query: dict[str, Any], row: dict[str, Any], line: int, at: int) -> None:
        spans, doc = query.setdefault("spans", []), row["doc"]  # a new query: none yet
        if self.in_place(spans, doc, row, at):
            return
        if row.get("span") is not None:
            wanted = flat(row["span"])
            found = [
                i
                for i, s in enumerate(spans)
                if s["doc"] == doc
                and s["grade"] >= 1
                and flat(self.texts[doc][s["start"] : s["end"]]) == wanted
            ]
            if not found:
                problem = f"no nugget of {doc} in {query['id']} reads {row['span'][:60]!r}"
                raise InputError(self.path, problem, line=line)
            old = spans[found[0]]
            new = self.nugget_entries(doc, (old["start"], old["end"]), row["nuggets"], line)
            if old.get("primary"):
                for entry in new:
                    entry.pop("primary", None)
            spans[found[0] : found[0] + 1] = new
            self.applied += 1
            return
        regions = [s for s in spans if s["doc"] == doc and s["grade"] == 0]
        first = row["nuggets"][0]["quote"]
        inside = [r for r in regions if self.holds(r, doc, first)]
        if not inside:
            if row.get("region") is None:
                problem = f"{doc} is not judged for {query['id']}: give `region`"
                raise InputError(self.path, problem, line=line)
            inside = [self.new_region(doc, first, row["region"], line)]
            spans.append(inside[0])
        bounds = (inside[0]["start"], inside[0]["end"])
        spans.extend(self.nugget_entries(doc, bounds, row["nuggets"], line))
        self.applied += 1

    def holds(self, region: dict[str, Any], doc: str, quote: str) -> bool:
        try:
            locate_quote(self.texts[doc], quote, region["start"], region["end"])
        except QuoteError:
            return False
        return True

    def new_region(self, doc: str, quote: str, kind: str, line: int) -> dict[str, Any]:
        reference = self.suite.reference
        if kind == "document":
            evidence = reference.extent_of(doc)
        else:
            start, end = self.locate(doc, quote, 0, None, line)
            sha = span_sha256(self.texts[doc], start, end)
            evidence = reference.span_of(reference.chunk_of(Evidence(doc, start, end, sha)))
        return span_entry(evidence, grade=0)

    def in_place(self, spans: list[dict], doc: str, row: dict[str, Any], at: int) -> bool:
        """Whether the decision (the `at`-th) was applied before: every nugget it grades >= 1 is
        a span with its grade and decisive words, or was split by a later decision that is in
        place itself, and the nugget it replaces is gone unless kept."""

        def text(span: dict[str, Any]) -> str:
            return flat(self.texts[span["doc"]][span["start"] : span["end"]])

        have = {(s["doc"], text(s), s["grade"], s.get("decisive")) for s in spans}
        graded = [n for n in row["nuggets"] if n["grade"]]
        later = [
            (i, r)
            for i, (_, r) in enumerate(self.rows[at + 1 :], at + 1)
            if r.get("query_id") == row["query_id"] and r.get("doc") == doc and r.get("span")
        ]

        def placed(nugget: dict[str, Any]) -> bool:
            if (doc, flat(nugget["quote"]), nugget["grade"], nugget.get("decisive")) in have:
                return True
            return any(
                flat(r["span"]) == flat(nugget["quote"]) and self.in_place(spans, doc, r, i)
                for i, r in later
            )

        old = row.get("span")
        kept = old is not None and any(flat(old) == flat(n["quote"]) for n in graded)
        gone = (
            old is None
            or kept
            or not any(s["doc"] == doc and s["grade"] >= 1 and text(s) == flat(old) for s in spans)
        )
        return all(map(placed, graded)) and gone and (bool(graded) or old is not None)

    def mark_primary(self, query: dict[str, Any], quote: str | None) -> None:
        spans = query["spans"]
        best = max(s["grade"] for s in spans)
        marked = [s for s in spans if s.get("primary")]
        if quote is not None:
            chosen = [
                s
                for s in spans
                if s["grade"] == best
                and flat(self.texts[s["doc"]][s["start"] : s["end"]]) == flat(quote)
            ]
        elif marked and marked[0]["grade"] == best:
            chosen = marked
        else:
            chosen = [s for s in spans if s["grade"] == best and best >= 1]
        for span in spans:
            span.pop("primary", None)
        if chosen and best >= 1:
            at = list(chosen[0])
            at.insert(at.index("grade") + 1, "primary")
            values = {**chosen[0], "primary": True}
            chosen[0].clear()
            chosen[0].update({key: values[key] for key in at})


def apply(name: str) -> None:
    suite_file = folder(name) / "suite.json"
    suite = load_suite(suite_file)
    step = Apply(suite, folder(name) / "agreement" / "nuggets" / "decisions.jsonl")
    rewrite_suite(suite_file, step)
    print(f"{suite_file}: {step.applied} decisions applied")


def main(argv: list[str]) -> int:
    command, *rest = argv
    try:
        if command == "list":
            list_nuggets(rest[0], rest[1:])
        elif command == "apply":
            for name in rest or SUITES:
                apply(name)
        else:
            print(__doc__)
            return 2
    except InputError as error:
        print(f"error: {error.describe()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
