"""`rageval lake check|repair|gc|compact`: looking after the lake (core.storage.upkeep)."""

from __future__ import annotations

import argparse

from rageval_pipeline.cli import add_storage_option, at_least


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    lake = subparsers.add_parser(
        "lake",
        help="check, repair, clean or compact the lake (RAGEVAL_WAREHOUSE=lake, or a URL)",
        description="Upkeep of <storage>/lake/ (docs/deploy.md, Lake upkeep).",
    )
    commands = lake.add_subparsers(dest="lake_command", required=True, metavar="ACTION")
    check = commands.add_parser(
        "check",
        help="list the commits that cannot be used (exit 1 when any)",
        description="One line per commit whose file is not whole, names a file outside the "
        "lake, or names a missing or cut Parquet file.",
    )
    check.set_defaults(func=run_check)
    repair = commands.add_parser(
        "repair",
        help="drop the commits `check` lists, leaving every other one as it is",
        description="Deletes each unusable commit file (its rows could not be read anyway); "
        "the files it named are then unreferenced, for `rageval lake gc`.",
    )
    repair.add_argument("--dry-run", action="store_true", help="list them, drop nothing")
    repair.set_defaults(func=run_repair)
    gc = commands.add_parser(
        "gc",
        help="delete files no commit keeps live (a killed writer's, compacted ones)",
        description="Deletes files unreferenced for at least --min-age-hours, so that a "
        "writer still writing and a read still running keep theirs.",
    )
    gc.add_argument("--dry-run", action="store_true", help="list them, delete nothing")
    gc.add_argument(
        "--min-age-hours",
        type=hours,
        default=24.0,
        help="keep files unreferenced for less than this (default: %(default)s)",
    )
    gc.set_defaults(func=run_gc)
    compact = commands.add_parser(
        "compact",
        help="fold each table's live files into one, now",
        description="Writers fold a table at 64 files; this does it on demand.",
    )
    compact.add_argument(
        "--at", type=at_least(2), default=2, help="tables with this many files or more"
    )
    compact.set_defaults(func=run_compact)
    for parser in (check, repair, gc, compact):
        add_storage_option(parser)


def hours(text: str) -> float:
    """An argparse type: a finite number of hours >= 0 (`-1` or `nan` would make every
    unreferenced file old enough, a writer's newest included)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of hours >= 0")
    return value


def _lake(args: argparse.Namespace):
    """The lake of `--storage`; a StorageError when there is none to look after (a typo'd
    folder must not read as a healthy, empty lake)."""
    from rageval_pipeline.core.storage.choose import open_warehouse
    from rageval_pipeline.core.storage.lake import COMMITS
    from rageval_pipeline.core.storage.location import StorageError, is_remote

    if not is_remote(args.storage) and not args.storage.is_dir():
        raise StorageError(args.storage, "no such folder: check --storage (or $RAGEVAL_STORAGE)")
    lake = open_warehouse(args.storage, kind="lake")
    if not lake.fs.exists(f"{lake.root}/{COMMITS}"):  # no commit at all: says so, or no bucket
        open_warehouse(args.storage, kind="lake", existing=True)
    return lake


def run_check(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.storage.upkeep import problems

    lake = _lake(args)
    found = problems(lake)
    for problem in found:
        print(problem)
    print(f"{lake.location}: {len(found)} unusable commit(s)")
    return 1 if found else 0


def run_repair(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.storage.upkeep import repair

    lake = _lake(args)
    found = repair(lake, dry_run=args.dry_run)
    for problem in found:
        print(f"{'would drop' if args.dry_run else 'dropped'} {problem.commit}: {problem.reason}")
    print(f"{lake.location}: {len(found)} commit(s) {'to drop' if args.dry_run else 'dropped'}")
    return 0


def run_gc(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.storage.upkeep import collect

    lake = _lake(args)
    found = collect(lake, min_age_s=args.min_age_hours * 3600, dry_run=args.dry_run)
    for path in found:
        print(f"{'would delete' if args.dry_run else 'deleted'} {lake.location}/{path}")
    print(f"{lake.location}: {len(found)} unreferenced file(s)")
    return 0


def run_compact(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.storage.upkeep import compact

    lake = _lake(args)
    folded = compact(lake, at=args.at)
    for table, files in folded.items():
        print(f"{table}: {files} files folded into 1")
    print(f"{lake.location}: {len(folded)} table(s) compacted")
    return 0
