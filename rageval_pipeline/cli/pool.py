"""`rageval pool SUITE -o SHEET` (write a judging sheet of unjudged pooled targets),
`rageval pool merge SUITE SHEET` (merge the graded sheet back into the suite file) and
`rageval pool difficulty SUITE [--write]` (measure each query's difficulty from the pool)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from rageval_pipeline.core import paths

    parser = subparsers.add_parser(
        "pool",
        help="pool systems' top k over a suite and write the unjudged targets to a sheet; "
        "`pool merge` merges the graded sheet",
        description="Run the configured systems plus BM25 and dense on other chunkings over a "
        "suite; write every target in the union of their top k that has no judgment to a "
        "judging sheet (CSV or JSONL by extension). `rageval pool merge SUITE SHEET` merges it.",
    )
    parser.add_argument("suite", type=Path, metavar="SUITE", help="suite file or folder")
    parser.add_argument("sheet_args", nargs="*", metavar="...", help=argparse.SUPPRESS)
    parser.add_argument("-o", "--output", type=Path, help="sheet path (.csv or .jsonl)")
    parser.add_argument("-k", "--depth", type=int, default=None, help="pool depth (default 20)")
    parser.add_argument(
        "--systems",
        type=Path,
        default=paths.data_dir() / "systems.yaml",
        help="systems file (default: data/systems.yaml)",
    )
    parser.add_argument("--no-extra", action="store_true", help="pool only the configured systems")
    parser.add_argument(
        "--overwrite", action="store_true", help="merge: replace judgments the sheet contradicts"
    )
    parser.add_argument(
        "--write", action="store_true", help="difficulty: store the measured difficulty"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # `pool merge SUITE SHEET` shares the parser: argparse cannot have a subcommand and a
    # positional in the same place, so "merge" as the first word selects the merge.
    if str(args.suite) == "merge":
        if len(args.sheet_args) != 2:
            print("error: usage: rageval pool merge SUITE SHEET [--overwrite]", file=sys.stderr)
            return 2
        return merge(Path(args.sheet_args[0]), Path(args.sheet_args[1]), args.overwrite)
    if str(args.suite) == "difficulty":
        if len(args.sheet_args) != 1:
            print("error: usage: rageval pool difficulty SUITE [--write]", file=sys.stderr)
            return 2
        args.suite = Path(args.sheet_args[0])
        return difficulty(args)
    if args.sheet_args:
        print(f"error: unexpected argument {args.sheet_args[0]!r}", file=sys.stderr)
        return 2
    if args.output is None:
        print("error: --output: give the sheet path (.csv or .jsonl)", file=sys.stderr)
        return 2
    return export(args)


def _pooled(args: argparse.Namespace):
    """(suite, system names, target ranks, depth) of the configured and extra systems."""
    from rageval_pipeline.core import paths, pool
    from rageval_pipeline.core.suites import load_suite
    from rageval_pipeline.core.systems import load_systems

    depth = args.depth or pool.DEFAULT_DEPTH
    suite = load_suite(args.suite)
    systems = dict(load_systems(args.systems))
    if not args.no_extra:
        systems |= {n: s for n, s in pool.extra_systems().items() if n not in systems}
    runs = pool.run_systems(
        suite,
        systems,
        max(depth, pool.RUN_DEPTH),
        embeddings_dir=paths.storage_dir() / "embeddings",
        base_dir=args.systems.parent,
    )
    return suite, list(systems), pool.target_ranks(suite, systems, runs, depth), depth


def export(args: argparse.Namespace) -> int:
    from rageval_pipeline.core import judging, pool

    judging.write_sheet([], args.output)  # refuse a bad sheet name before the slow part
    suite, systems, ranks, depth = _pooled(args)
    entries = pool.unjudged(suite, ranks)
    judging.write_sheet(entries, args.output)
    pooled = ranks[["query_id", "target_id"]].drop_duplicates()
    print(
        f"pooled {len(pooled)} (query, target) pairs at depth {depth} over {len(systems)} "
        f"systems ({', '.join(systems)}); {len(entries)} unjudged written to {args.output}"
    )
    return 0


def difficulty(args: argparse.Namespace) -> int:
    """Print where the stored difficulty differs from the measured one; store it with --write.
    Exit 1 when they differ and nothing was written."""
    from collections import Counter

    from rageval_pipeline.core import judging, pool

    suite, systems, ranks, depth = _pooled(args)
    measured = pool.difficulty(suite, ranks, systems, depth)
    stored = {q.id: q.difficulty for q in suite.queries}
    changed = [q for q in measured if measured[q] != stored[q]]
    for query_id in changed:
        print(f"{query_id}: stored {stored[query_id]}, measured {measured[query_id]}")
    counts = Counter(measured.values())
    print(", ".join(f"{level} {counts[level]}" for level in ("easy", "medium", "hard")))
    if changed and args.write:

        def edit(raw_queries: dict) -> None:
            for query_id in changed:
                raw_queries[query_id]["difficulty"] = measured[query_id]

        judging.rewrite_suite(judging.suite_file(args.suite), edit)
        print(f"stored {len(changed)} changed difficulties")
        return 0
    return 1 if changed else 0


def merge(suite_path: Path, sheet: Path, overwrite: bool) -> int:
    from rageval_pipeline.core import judging

    result = judging.merge_sheet(judging.suite_file(suite_path), sheet, overwrite=overwrite)
    if result.conflicts:
        for conflict in result.conflicts:
            print(f"conflict: {conflict.describe(sheet)}", file=sys.stderr)
        print(
            f"error: {sheet}: {len(result.conflicts)} grade(s) contradict existing judgments; "
            "nothing written (re-run with --overwrite to replace them)",
            file=sys.stderr,
        )
        return 2
    print(
        f"merged {sheet} into {judging.suite_file(suite_path)}: {result.added} added, "
        f"{result.overwritten} overwritten, {result.unchanged} unchanged, "
        f"{result.skipped} skipped (no grade)"
    )
    return 0
