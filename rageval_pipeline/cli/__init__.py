"""`rageval`: trec_eval-style evaluation, run comparison, suite validation, baselines.

Every subcommand module contributes `add_parsers(subparsers)` and imports its heavy libraries
(pandas, scipy, DuckDB) inside the functions that need them, so `rageval --help` starts fast.
Bad input anywhere surfaces as one `error: file:line: field: problem` line and exit code 2,
never a traceback; a bad option value is refused by argument parsing (also exit 2).
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
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


def at_least(low: int):
    """An argparse type: an integer >= low (argparse turns the ValueError into exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below the minimum {low}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def build_parser() -> argparse.ArgumentParser:
    from rageval_pipeline.cli import (
        baseline,
        experiments,
        history,
        pool,
        score,
        suggest,
        synth,
        validate,
    )

    parser = argparse.ArgumentParser(prog="rageval", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (score, validate, baseline, history, suggest, synth, pool, experiments):
        module.add_parsers(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return status
    except InputError as exc:
        print(f"error: {' '.join(exc.describe().split())}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped early (`rageval eval ... | head -1`): what it read is what it
        # wanted. Point stdout at /dev/null so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def entry() -> None:
    """The `rageval` console script: `main`, then an immediate exit.

    The interpreter's own teardown after a large evaluation (freeing about 1 GB of arrays one
    object at a time, then pandas' and pyarrow's modules) takes about 0.25 s and changes
    nothing anyone sees, so once `main` has returned, the exit handlers (`logging.shutdown`...)
    have run and the output is flushed, the process ends with os._exit. The ordinary exit is
    kept whenever it could matter: a non-daemon thread still running (it waits for it), a
    flush failing (it reports that as it always did). `main` returns normally, for in-process
    callers.
    """
    status = main()
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status)


if __name__ == "__main__":
    entry()
