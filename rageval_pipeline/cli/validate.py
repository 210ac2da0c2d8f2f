"""`rageval validate PATH...`: check golden suites, `systems.yaml` and `gate.yaml` before they
are committed or evaluated."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rageval_pipeline.core.errors import InputError

_POLICY_FILES = ("gate.yaml", "gate.yml")
_SYSTEMS_FILES = ("systems.yaml", "systems.yml")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check golden suites, systems.yaml and gate.yaml",
        description="Validate golden suites, systems files and gate policies (by file name: "
        "systems.yaml, gate.yaml); exit 0 when all are valid, 2 otherwise.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a suite file or folder, a systems.yaml or a gate.yaml",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check every path (one bad suite does not hide the next one's problems)."""

    status = 0
    for path in args.paths:
        try:
            summary = _check(path)
        except InputError as error:
            print(f"error: {error.describe()}", file=sys.stderr)
            status = 2
            continue
        print(f"ok: {path} ({summary})")
    return status


def _check(path: Path) -> str:
    """Load `path` as what its name says it is; a short summary of what it holds."""
    from rageval_pipeline.core.gate import load_policy
    from rageval_pipeline.core.suites.consistency import inconsistencies
    from rageval_pipeline.core.suites.golden import load_suite
    from rageval_pipeline.core.systems import load_systems

    if not path.exists():  # before its name or extension is read as a claim about its kind
        raise InputError(path, "no such file or folder")
    if path.name in _POLICY_FILES:
        return f"gate policy, {len(load_policy(path).datasets)} dataset rule(s)"
    if path.name in _SYSTEMS_FILES:
        return f"{len(load_systems(path))} system(s)"
    suite = load_suite(path)
    for move in suite.moves:  # judged text found at other offsets: accepted where it is now
        print(
            f"note: {path}: {move.describe()} (`rageval spans convert` writes it)", file=sys.stderr
        )
    if found := inconsistencies(suite):  # near-duplicate targets graded differently
        for item in found[:-1]:
            print(f"error: {path}: {item.field}: {item.problem}", file=sys.stderr)
        raise InputError(path, found[-1].problem, field=found[-1].field)
    if not suite.queries:
        print(f"warning: {path}: no queries yet (add them, then `rageval pool`)", file=sys.stderr)
    for index, query in enumerate(suite.queries):
        if not query.judged:  # a new query: pooled and graded next, gated only once judged
            print(
                f"warning: {path}: queries[{index}] {query.id}: not yet judged "
                "(`rageval pool`, grade the sheet, `rageval pool merge`)",
                file=sys.stderr,
            )
    return (
        f"{len(suite.documents)} documents, {len(suite.queries)} queries, "
        f"{suite.judgment_count} judgments"
    )
