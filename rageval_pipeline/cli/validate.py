"""`rageval validate PATH...`: check golden suites before they are committed or evaluated."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rageval_pipeline.core.errors import InputError


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check golden suite files",
        description="Validate golden suites; exit 0 when all are valid, 2 otherwise.",
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="a suite file or a suite folder"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check every path (one bad suite does not hide the next one's problems)."""
    from rageval_pipeline.core.suites import load_suite

    status = 0
    for path in args.paths:
        try:
            suite = load_suite(path)
        except InputError as error:
            print(f"error: {error.describe()}", file=sys.stderr)
            status = 2
            continue
        print(
            f"ok: {path} ({len(suite.documents)} documents, {len(suite.queries)} queries, "
            f"{suite.judgment_count} judgments)"
        )
    return status
