"""`rageval spans convert SUITE...`: rewrite chunk-id judgments as the exact evidence spans of
the suite's reference chunking (docs/suite-format.md), in place; `rageval spans nuggets
SUITE...`: bump a suite of format 1.0 to 1.1, whose spans are graded nugget by nugget."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "spans",
        help="evidence spans of golden suites: `spans convert` rewrites chunk-id judgments, "
        "`spans nuggets` bumps the format to graded nuggets",
        description="Evidence spans of golden suites.",
    )
    commands = parser.add_subparsers(dest="spans_command", required=True, metavar="COMMAND")
    convert = commands.add_parser(
        "convert",
        help="rewrite chunk-id judgments and top_1_chunk as spans, in place",
        description="Rewrite each chunk-id judgment as the exact span of its chunk under the "
        "suite's reference chunking (and top_1_chunk as top_1_span), and write the new "
        "offsets of spans whose text moved. The chunk-level qrels stay exactly as they were. "
        "The suite file is replaced only when the result validates.",
    )
    convert.add_argument("suites", nargs="+", type=Path, metavar="SUITE", help="file or folder")
    convert.set_defaults(func=run_convert)
    nuggets = commands.add_parser(
        "nuggets",
        help="bump a suite of format 1.0 to 1.1 (each span graded as a nugget), in place",
        description="Write suite format 1.1, in which each span's grade is its own: how much of "
        "the answer that nugget carries. Every span keeps the grade it has (in 1.0, its "
        "target's), so the derived grades are unchanged until the nuggets are re-judged. The "
        "suite file is replaced only when the result validates.",
    )
    nuggets.add_argument("suites", nargs="+", type=Path, metavar="SUITE", help="file or folder")
    nuggets.set_defaults(func=run_nuggets)


def run_convert(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.curation.span_conversion import convert_suite
    from rageval_pipeline.core.suites.golden import resolve_suite_file

    for path in args.suites:
        suite_file = resolve_suite_file(path)
        print(f"{suite_file}: {convert_suite(suite_file).describe()}")
    return 0


def run_nuggets(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.curation.span_conversion import to_nuggets
    from rageval_pipeline.core.suites.golden import FORMAT_VERSION, resolve_suite_file

    for path in args.suites:
        suite_file = resolve_suite_file(path)
        count = to_nuggets(suite_file)
        if count is None:
            print(f"{suite_file}: at format {FORMAT_VERSION} already, nothing written")
        else:
            print(
                f"{suite_file}: format {FORMAT_VERSION}; {count} spans graded >= 1 keep their "
                "target's grade until re-judged as nuggets"
            )
    return 0
