"""`rageval`: trec_eval-style evaluation, run comparison, suite validation, baselines.

Every subcommand module contributes `add_parsers(subparsers)` and imports its heavy libraries
(pandas, scipy, DuckDB) inside the functions that need them, so `rageval --help` starts fast.
Bad input anywhere surfaces as one `error: file:line: field: problem` line and exit code 2,
never a traceback; a bad option value is refused by argument parsing (also exit 2). One
grammar for every command (docs/cli.md); the spellings it replaced are rewritten by `grammar`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rageval_pipeline.cli import grammar
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.settings.folders import storage_location, storage_problem, url_problem


class Refused(Exception):
    """An `InputError` met while argparse converts an option (a URL given as a folder, or one in
    the environment default): argparse would print a ValueError as `invalid path value`, so
    it is carried past argparse to `main`, which prints it as any other."""

    def __init__(self, error: InputError) -> None:
        super().__init__(str(error))
        self.error = error


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """`--storage`: the pipeline's storage folder or URL (its warehouse: `open_warehouse`)."""
    from rageval_pipeline.core.io import paths

    parser.add_argument(
        "--storage",
        type=path_or("$RAGEVAL_STORAGE", paths.storage_dir, "--storage", url_ok=True),
        default="$RAGEVAL_STORAGE",
        help="pipeline storage folder or s3:// URL (default: %(default)s)",
    )


def add_systems_option(parser: argparse.ArgumentParser) -> None:
    """`--systems`: the systems file, by default the data folder's systems.yaml."""
    from rageval_pipeline.core.io import paths

    parser.add_argument(
        "--systems",
        type=path_or(
            "$RAGEVAL_DATA/systems.yaml",
            lambda: paths.data_dir() / "systems.yaml",
            "--systems",
            "file",
        ),
        default="$RAGEVAL_DATA/systems.yaml",
        help="systems file (default: %(default)s)",
    )


POLICY_FILE = "$RAGEVAL_DATA/gate.yaml"


def add_policy_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--policy FILE`: the gate policy, `what` the command uses it for (`policy_of`)."""
    from rageval_pipeline.core.io import paths

    parser.add_argument(
        "--policy",
        type=path_or(POLICY_FILE, lambda: paths.data_dir() / "gate.yaml", "--policy", "file"),
        metavar="FILE",
        help=f"{what} (default: {POLICY_FILE} when it exists, else the defaults of docs/gate.md)",
    )


def policy_of(given: Path | None):
    """The gate policy a command reads, the one place the CLI reads gate.yaml: the `--policy`
    file, else the data folder's when it exists, else the defaults (as the pipeline's policy
    resource reads it: `core.gate.policy_or_defaults`)."""
    from rageval_pipeline.core.gate import load_policy, policy_or_defaults
    from rageval_pipeline.core.io import paths

    if given is not None:
        return load_policy(given)
    return policy_or_defaults(paths.data_dir() / "gate.yaml")


def path_or(
    placeholder: str,
    folder: Callable[[], Path],
    option: str,
    what: str = "folder",
    *,
    url_ok: bool = False,
):
    """An argparse type for a local path (a URL is refused, not taken for one; with `url_ok`,
    the storage folder's URL is taken as such) whose default comes from the environment.
    argparse passes a string default through the type only when the command runs without the
    option, so the default is `placeholder` (shown by --help) and the settings are read then:
    building the parser reads none (no pydantic before `eval` starts reading its run)."""

    def parse(text: str) -> Path:
        try:
            if text == placeholder:
                return folder()
            if problem := (storage_problem(text) if url_ok else url_problem(text, what)):
                raise InputError(option, problem)
            return storage_location(text) if url_ok else Path(text)
        except InputError as exc:
            raise Refused(exc) from None

    parse.__name__ = "path"
    return parse


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


def price(text: str) -> float:
    """An argparse type: a price per million tokens, a finite number from 0 to 10^6 (as
    $RAGEVAL_PRICE_IN/_OUT); `nan`, `inf`, negatives and overflowing values refused."""
    from rageval_pipeline.core.settings.providers import MAX_PRICE  # (given: parsing, not building)

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= MAX_PRICE:  # (False for nan)
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to {MAX_PRICE:.0f}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from rageval_pipeline.cli import (
        baseline,
        experiments,
        gate,
        history,
        lake,
        pool,
        qrels,
        score,
        spans,
        suggest,
        suite,
        synth,
        validate,
    )

    parser = argparse.ArgumentParser(prog="rageval", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        score,
        gate,
        validate,
        suite,
        spans,
        qrels,
        baseline,
        history,
        lake,
        suggest,
        synth,
        pool,
        experiments,
    ):
        module.add_parsers(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = None
    try:
        args = build_parser().parse_args(grammar.current(sys.argv[1:] if argv is None else argv))
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return status
    except (InputError, Refused) as exc:
        return _refused(exc.error if isinstance(exc, Refused) else exc)
    except BrokenPipeError:
        # The reader stopped early (`rageval eval ... | head -1`): what it read is what it
        # wanted. Point stdout at /dev/null so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if (error := _object_store_error(exc, args)) is None:
            raise
        return _refused(error)


def _refused(error: InputError) -> int:
    """Print an InputError as its one line; the exit status 2."""
    print(f"error: {' '.join(error.describe().split())}", file=sys.stderr)
    return 2


def _object_store_error(exc: BaseException, args: argparse.Namespace | None) -> InputError | None:
    """What s3fs or botocore raised, as the one line of core.storage.faults, or None."""
    from rageval_pipeline.core.io import paths
    from rageval_pipeline.core.storage.faults import object_store_error

    storage = getattr(args, "storage", None)
    try:
        storage = storage or paths.storage_dir()
    except InputError:
        return None
    return object_store_error(exc, storage)


def entry() -> None:
    """The `rageval` console script: `main`'s status as the exit status, by the ordinary exit.

    An exit by os._exit, skipping the interpreter's teardown, saved 0.16 s and 0.41 s of CPU in
    the median of two side-by-side script runs, inside the spread of either build (bench/README.md,
    "Fast paths in one place"), so the process ends as any other: exit handlers, flushes and
    waiting threads included."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
