"""The team of docs/own-suite.md, for its tests: their documents (tests/fixtures/own_docs, plus a
PDF made here), ten queries with the section that answers each, an assessor who grades a sheet
by them, and their own search service as a Python entry point (a good and a broken version)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.conftest import REPO

DOCS = REPO / "tests" / "fixtures" / "own_docs"
# query id -> (query, the reference section that answers it)
QUERIES = {
    "K01": ("how do I install kettle with pip", "guide/install:chunk:1"),
    "K02": ("install kettle from a source checkout", "guide/install:chunk:2"),
    "K03": ("declare a route with path parameters", "guide/routing:chunk:1"),
    "K04": ("which route wins when two routes match", "guide/routing:chunk:2"),
    "K05": ("reload templates on every request while developing", "guide/templates:chunk:2"),
    "K06": ("is autoescaping on for html templates", "guide/templates:chunk:1"),
    "K07": ("how many worker processes to start", "guide/deploy:chunk:1"),
    "K08": ("health check endpoint healthz", "guide/deploy:chunk:2"),
    "K09": ("set a cookie on the response", "api/cookies:chunk:1"),
    "K10": ("register a custom error page for 404", "api/errors:chunk:1"),
}


def pdf_bytes(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica (with its cross-reference table)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def docs_folder(root: Path) -> Path:
    """The fixture documents and a PDF, in a folder of their own."""
    import shutil

    folder = Path(shutil.copytree(DOCS, root / "docs"))
    (folder / "guide" / "faq.pdf").write_bytes(pdf_bytes("Kettle is licensed under MIT."))
    return folder


def add_queries(suite_file: Path) -> None:
    """The queries as a team writes them first: text and intent, no judgments."""
    suite = json.loads(suite_file.read_text())
    suite["queries"] = [
        {"id": qid, "query": text, "intent": "procedural"} for qid, (text, _) in QUERIES.items()
    ]
    suite_file.write_text(json.dumps(suite, indent=2) + "\n")


def grade_sheet(sheet: Path) -> int:
    """Grade a CSV sheet as the team's assessor does: 3 for the section that answers the
    query, 0 for any other; returns the rows graded."""
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["grade"] = "3" if QUERIES[row["query_id"]][1] == row["target_id"] else "0"
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


# The team's search service, called in process (`retriever: python`): pages (document ids,
# the paths `suite init` made them from) ranked by the words their best section shares with
# the query. BROKEN is the bad change: an inverted filter that keeps only pages sharing no word.
SEARCH = '''"""The team's search: pages ranked by the words their best section shares."""
import re

from rageval_pipeline.core.suites.chunking import split_text
from rageval_pipeline.core.suites.golden import load_suite

BROKEN = {broken}
_SUITE = load_suite({suite!r})
_SECTIONS = [
    (d.id, set(re.findall(r"[a-z0-9]+", text.lower())))
    for d in _SUITE.documents
    for text in split_text(d.text, _SUITE.chunking)
]


def search(query, top_k):
    words = set(re.findall(r"[a-z0-9]+", query.lower()))
    best = {{}}
    for page, found in _SECTIONS:
        best[page] = max(best.get(page, 0), len(words & found))
    keep = [(page, s) for page, s in best.items() if (s == 0) == BROKEN]
    return sorted(keep, key=lambda hit: (-hit[1], hit[0]))[:top_k]
'''


def write_search(data: Path, suite_dir: Path, *, broken: bool) -> None:
    (data / "team_search.py").write_text(SEARCH.format(broken=broken, suite=str(suite_dir)))


def judge(folder: Path, sheet: Path, *pool_args: str) -> None:
    """Pool the suite's queries, grade the sheet, say why the templated twins differ, merge:
    steps 3 to 5 of docs/own-suite.md."""
    from rageval_pipeline.cli import main

    assert main(["pool", "export", str(folder), "-o", str(sheet), "-k", "5", *pool_args]) == 0
    grade_sheet(sheet)
    suite = json.loads((folder / "suite.json").read_text())
    suite["distinct"] = [
        {"targets": ["api/headers:chunk:1", "api/cookies:chunk:1"], "reason": "headers, cookies"}
    ]
    (folder / "suite.json").write_text(json.dumps(suite, indent=2) + "\n")
    assert main(["pool", "merge", str(folder), str(sheet)]) == 0
    assert main(["validate", str(folder)]) == 0
