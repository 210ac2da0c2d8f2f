"""`rageval baseline update|show`: promote a reviewed evaluation to the committed baseline."""

from __future__ import annotations

import argparse
import sys

from rageval_pipeline.cli import add_policy_option, add_storage_option, path_or, policy_of
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import paths


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "baseline",
        help="update or show committed baselines",
        description="The committed baselines a gate compares with: `update` writes an "
        "evaluation as a baseline file, `show` prints the evaluations it would use.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, help_text in (
        ("update", "write the latest (or a chosen) evaluation as the baseline file"),
        ("show", "print the evaluations a baseline update would use"),
    ):
        sub = actions.add_parser(action, help=help_text, description=help_text.capitalize() + ".")
        sub.add_argument("--dataset", required=True, help="the dataset evaluated")
        sub.add_argument("--system", help="one system (default: every evaluated system)")
        sub.add_argument("--run-id", help="a specific evaluation run (default: the latest)")
        add_storage_option(sub)
        sub.add_argument(
            "--baselines",
            type=path_or("$RAGEVAL_BASELINES", paths.baselines_dir, "--baselines"),
            default="$RAGEVAL_BASELINES",
            help="baseline folder (default: $RAGEVAL_BASELINES, else data/baselines)",
        )
        sub.set_defaults(func=_update if action == "update" else _show)
    update = actions.choices["update"]
    update.add_argument("--note", help="why this baseline was accepted")
    update.add_argument(
        "--accept-worse",
        metavar="REASON",
        help="store a baseline worse than the one it replaces; the reason is kept in the "
        "baseline and the experiments log, and the anchor stays where it was",
    )
    update.add_argument(
        "--force",
        action="store_true",
        help="the older spelling of --accept-worse, with the reason in --note",
    )
    update.add_argument(
        "--pin-anchor",
        action="store_true",
        help="make this baseline the anchor later runs are held to with the cumulative band",
    )
    add_policy_option(update, "the gate policy that decides if the new baseline is worse")


def _selected(args: argparse.Namespace):
    from rageval_pipeline.core.history.summaries import select_runs, summaries
    from rageval_pipeline.core.storage.choose import open_warehouse

    warehouse = open_warehouse(args.storage, existing=True)
    runs = select_runs(warehouse, dataset=args.dataset, system=args.system, run_id=args.run_id)
    if runs.empty:
        raise InputError(
            warehouse.location,
            f"no evaluation of dataset {args.dataset!r}"
            + (f" by system {args.system!r}" if args.system else ""),
        )
    return summaries(warehouse, runs)


def _show(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.measures.names import sort_key

    for s in _selected(args):
        means = ", ".join(f"{m}={s.measures[m]:.4f}" for m in sorted(s.measures, key=sort_key))
        print(f"{s.dataset}/{s.system} run {s.run_id} ({s.fingerprint}): {means}")
    return 0


def _update(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.gate.baselines import promote

    selected = _selected(args)
    written = promote(
        selected,
        args.baselines,
        policy_of(args.policy),
        accept_worse=args.accept_worse,
        pin_anchor=args.pin_anchor,
        force=args.force,
        note=args.note,
    )
    accepted = [p for p in written if p.refused]
    if accepted:
        _log_accepted(args, accepted)
    for promotion in written:
        print(f"wrote {promotion.path}")
        for line in promotion.lines:
            print(f"  {line}")
        for line in _lineage_lines(promotion.baseline):
            print(f"  {line}")
        for line in promotion.worse:  # written, but every later run is judged against it
            print(
                f"warning: {promotion.path}: the new baseline is worse on {line}; later runs "
                "are compared with the worse value",
                file=sys.stderr,
            )
    return 0


def _lineage_lines(baseline) -> list[str]:
    """What the written baseline replaced, why it was accepted as worse, what it is held to."""
    lines = []
    if baseline.accepted_worse:
        lines.append(f"accepted worse: {baseline.accepted_worse}")
    # The measures that decide (the recorded policy's), old -> new; else the first four.
    decide = baseline.policy.compare if baseline.policy and baseline.policy.compare else None
    if (old := baseline.replaced) is not None:
        names = decide or sorted(old.measures)[:4]
        means = ", ".join(
            f"{m} {old.measures[m]:.4f} -> {baseline.measures[m]:.4f}"
            if m in baseline.measures
            else f"{m} {old.measures[m]:.4f}"
            for m in names
            if m in old.measures
        )
        lines.append(
            f"replaces the baseline of {old.recorded_at} (run {old.source_run_id}): {means}"
        )
    anchor = baseline.anchor
    if anchor is None:
        lines.append("anchor: this baseline")
    else:
        pinned = "pinned " if anchor.pinned else ""
        names = decide or sorted(anchor.measures)[:4]
        means = ", ".join(f"{m} {anchor.measures[m]:.4f}" for m in names if m in anchor.measures)
        lines.append(
            f"anchor: the {pinned}baseline of {anchor.recorded_at} (run {anchor.source_run_id}): "
            f"{means}"
        )
    return lines


def _log_accepted(args: argparse.Namespace, accepted: list) -> None:
    """Each worse baseline accepted, with its reason, into the experiments log."""
    from datetime import UTC, datetime

    from rageval_pipeline.core.history import experiments
    from rageval_pipeline.core.storage.choose import open_warehouse

    store = open_warehouse(args.storage, existing=True)
    with store.connect():
        experiments.record_accepted_worse(
            store,
            [p.baseline for p in accepted],
            [p.refused for p in accepted],
            created_at=datetime.now(UTC),
        )
