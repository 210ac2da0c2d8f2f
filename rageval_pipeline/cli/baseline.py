"""`rageval baseline update|show`: promote a reviewed evaluation to the committed baseline."""

from __future__ import annotations

import argparse
from pathlib import Path

from rageval_pipeline.cli import add_storage_option
from rageval_pipeline.core import paths
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import baseline_from_summary, baseline_path, write_baseline
from rageval_pipeline.core.measures.names import sort_key
from rageval_pipeline.core.storage import Warehouse
from rageval_pipeline.core.summaries import select_runs, summaries


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("baseline", help="update or show committed baselines")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, help_text in (
        ("update", "write the latest (or a chosen) evaluation as the baseline file"),
        ("show", "print the evaluations a baseline update would use"),
    ):
        sub = actions.add_parser(action, help=help_text)
        sub.add_argument("--dataset", required=True)
        sub.add_argument("--system", help="one system (default: every evaluated system)")
        sub.add_argument("--run-id", help="a specific evaluation run (default: the latest)")
        add_storage_option(sub)
        sub.add_argument(
            "--baselines",
            type=Path,
            default=paths.baselines_dir(),
            help="baseline folder ($RAGEVAL_BASELINES, default data/baselines)",
        )
        sub.set_defaults(func=_update if action == "update" else _show)
    actions.choices["update"].add_argument("--note", help="why this baseline was accepted")


def _selected(args: argparse.Namespace):
    warehouse = Warehouse.existing(args.storage)
    runs = select_runs(warehouse, dataset=args.dataset, system=args.system, run_id=args.run_id)
    if runs.empty:
        raise InputError(
            warehouse.path,
            f"no evaluation of dataset {args.dataset!r}"
            + (f" by system {args.system!r}" if args.system else ""),
        )
    return summaries(warehouse, runs)


def _show(args: argparse.Namespace) -> int:
    for s in _selected(args):
        means = ", ".join(f"{m}={s.measures[m]:.4f}" for m in sorted(s.measures, key=sort_key))
        print(f"{s.dataset}/{s.system} run {s.run_id} ({s.fingerprint}): {means}")
    return 0


def _update(args: argparse.Namespace) -> int:
    for s in _selected(args):
        path = baseline_path(args.baselines, s.dataset, s.system)
        write_baseline(baseline_from_summary(s, note=args.note), path)
        print(f"wrote {path} from run {s.run_id}")
    return 0
