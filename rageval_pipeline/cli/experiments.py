"""`rageval experiments`: the log of gated evaluations (docs/tuning.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rageval_pipeline.cli import add_storage_option


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "experiments",
        help="list the experiments log",
        description="One entry per gated evaluation: id, date, dataset and system, verdict, "
        "description and the configuration changes it judged.",
    )
    parser.add_argument("--dataset", help="only this dataset")
    parser.add_argument("--system", help="only this system")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        dest="export",
        metavar="FILE",
        help="also write the log as JSON to this file (experiments.json's shape)",
    )
    add_storage_option(parser)
    parser.set_defaults(func=_list)


def _list(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.history import experiments
    from rageval_pipeline.core.storage.choose import open_warehouse

    log = experiments.load(
        open_warehouse(args.storage, existing=True), dataset=args.dataset, system=args.system
    )
    for e in log:
        print(f"{e.id}  {e.date}  {e.dataset}/{e.system}  {e.verdict}  {e.description}")
        for key, (before, after) in e.config_changes.items():
            print(f"    {key}: {before} -> {after}")
        print(f"    reason: {e.reason}")
    if not log:
        print("no experiments recorded")
    if args.export:
        experiments.export(log, args.export)
        print(f"wrote {args.export}")
    return 0
