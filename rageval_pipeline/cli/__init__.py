"""`rageval`: trec_eval-style evaluation, run comparison, suite validation, baselines.

Every subcommand module contributes `add_parsers(subparsers)`; bad input anywhere surfaces as
one `error: file:line: field: problem` line and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rageval_pipeline.core.errors import InputError


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """`--storage`: the pipeline folder holding rageval.duckdb, for commands that read it."""
    from rageval_pipeline.core import paths

    parser.add_argument(
        "--storage",
        type=Path,
        default=paths.storage_dir(),
        help="pipeline storage folder holding rageval.duckdb ($RAGEVAL_STORAGE)",
    )


def build_parser() -> argparse.ArgumentParser:
    from rageval_pipeline.cli import baseline, history, pool, score, suggest, validate

    parser = argparse.ArgumentParser(prog="rageval", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (score, validate, baseline, history, suggest, pool):
        module.add_parsers(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"error: {exc.describe()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
