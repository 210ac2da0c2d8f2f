"""`rageval history`: how a measure moved across evaluations (the warehouse's `history` view)."""

from __future__ import annotations

import argparse

from rageval_pipeline.cli import add_storage_option, at_least
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures.defaults import PRIMARY_MEASURE


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "history",
        help="a measure across evaluations, oldest first",
        description="One line per evaluation: time, dataset, system, fingerprint, level, value.",
    )
    parser.add_argument("--dataset", required=True, help="the dataset evaluated")
    parser.add_argument("--system", help="one system (default: all)")
    parser.add_argument(
        "-m", "--measure", default=PRIMARY_MEASURE, help="the measure shown (default: %(default)s)"
    )
    parser.add_argument("--limit", type=at_least(1), default=20, help="most recent N evaluations")
    add_storage_option(parser)
    parser.set_defaults(func=run_history)
    parser = subparsers.add_parser(
        "to-lake",
        help="copy the DuckDB warehouse's history into the lake (RAGEVAL_WAREHOUSE=lake)",
        description="Copies every run, reuse, verdict and experiment of <storage>/rageval.duckdb "
        "into <storage>/lake/ in one commit; the DuckDB file is left as it is.",
    )
    add_storage_option(parser)
    parser.set_defaults(func=run_to_lake)


def run_history(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.history import measure_history
    from rageval_pipeline.core.measures import parse_measure
    from rageval_pipeline.core.storage.choose import open_warehouse

    measure = str(parse_measure(args.measure))
    warehouse = open_warehouse(args.storage, existing=True)
    rows = measure_history(warehouse, args.dataset, measure, args.system, args.limit)
    if rows.empty:
        raise InputError(warehouse.location, f"no {measure} for dataset {args.dataset!r}")
    for row in rows.itertuples(index=False):
        stamp = row.created_at.strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{stamp}\t{row.dataset}\t{row.system}\t{row.fingerprint}\t{row.level}"
            f"\t{measure}\t{row.value:.4f}"
        )
    return 0


def run_to_lake(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.storage import migrate
    from rageval_pipeline.core.storage.choose import open_warehouse

    lake = open_warehouse(args.storage, kind="lake")
    copied = migrate.copy(open_warehouse(args.storage, kind="duckdb", existing=True), lake)
    print(f"copied {copied} run(s) into {lake.location}")
    return 0
