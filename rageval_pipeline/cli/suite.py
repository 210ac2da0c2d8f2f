"""`rageval suite init DOCS --name NAME`: a new golden suite from a folder of Markdown, text,
HTML and PDF files, in the data folder beside the bundled ones, with no queries yet
(docs/own-suite.md)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from rageval_pipeline.cli import path_or

    parser = subparsers.add_parser(
        "suite",
        help="start a golden suite from a folder of documents (`suite init`)",
        description="Golden suites: `init` starts one from a folder of Markdown, text, HTML "
        "and PDF files, in the data folder beside the bundled ones, with no queries yet "
        "(docs/own-suite.md).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser(
        "init",
        help="a suite from a folder of Markdown, text, HTML and PDF files",
        description="Write $RAGEVAL_DATA/suites/NAME/ (suite.json and documents/) from every "
        "Markdown, text, HTML and PDF file under DOCS, ids from their relative paths, the "
        "reference chunking chosen by format, and no queries yet.",
    )
    init.add_argument("docs", type=Path, metavar="DOCS", help="folder of documents")
    init.add_argument("--name", required=True, help="suite name (= its folder, the partition)")
    init.add_argument("--description", default="", help="what the suite covers")
    init.add_argument(
        "--follow-links",
        action="store_true",
        help="read files that symlinks lead to outside DOCS (refused otherwise), each one said",
    )
    init.add_argument(
        "--data",
        type=path_or("$RAGEVAL_DATA", _data_dir, "--data"),
        default="$RAGEVAL_DATA",
        help="data folder; the suite goes to its suites/ (default: %(default)s)",
    )
    init.set_defaults(func=run_init)


def _data_dir() -> Path:
    from rageval_pipeline.core.io import paths

    return paths.data_dir()


def run_init(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.errors import printable
    from rageval_pipeline.core.suites.sources import init_suite

    docs = printable(str(args.docs))

    def log(line: str) -> None:
        print(f"suite init: {docs}: {line}", file=sys.stderr, flush=True)

    path, sources, skipped = init_suite(
        args.docs,
        args.data / "suites",
        args.name,
        args.description,
        follow_links=args.follow_links,
        log=log,
    )
    for item in skipped:
        print(f"note: {docs}: {item}", file=sys.stderr)
    kinds = Counter(s.kind for s in sources)
    from rageval_pipeline.core.suites.golden import load_suite

    suite = load_suite(path)
    chunks = sum(suite.reference.chunk_counts.values())
    print(
        f"wrote {path}: {len(sources)} documents ("
        + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        + f"), reference chunking {suite.chunking.strategy} ({chunks} sections), no queries yet"
    )
    print(f"next: add queries to {path}, then `rageval pool export {path.parent} -o sheet.csv`")
    return 0
