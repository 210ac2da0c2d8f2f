"""`rageval pool export SUITE -o SHEET` (write a judging sheet of unjudged pooled targets),
`rageval pool merge SUITE SHEET` (merge the graded sheet back into the suite file),
`rageval pool difficulty SUITE [--write]` (measure each query's difficulty from the pool),
`rageval pool agree SUITE SHEET [--third-sheet PATH] -o DIR` (agreement of a second judging
pass with the suite's grades; a blind sheet of the disagreements for a third reader) and
`rageval pool agree SUITE SHEET --third THIRD_SHEET --write [-o DIR]` (the third reading's
decisions stored)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rageval_pipeline.core.curation.judging import MergeResult
    from rageval_pipeline.core.curation.pool_cost import Measured, Pending
    from rageval_pipeline.core.curation.readings import RoundReport

# Pooling goes on without asking when the embedding is measured to take at most this long.
EMBED_WITHOUT_ASKING_S = 60.0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from rageval_pipeline.cli import add_systems_option, at_least

    parser = subparsers.add_parser(
        "pool",
        help="pool systems' top k over a suite into a judging sheet, merge it back, measure "
        "difficulty, or compare a second judging pass",
        description="Pooling and judging a golden suite: `export` writes the unjudged targets "
        "of the systems' top k to a sheet, `merge` brings the graded sheet back, `difficulty` "
        "measures each query's difficulty from the pool and `agree` compares a second judging "
        "pass with the suite's grades.",
    )
    actions = parser.add_subparsers(dest="pool_command", required=True, metavar="ACTION")
    pooling = argparse.ArgumentParser(add_help=False)
    pooling.add_argument("suite", type=Path, metavar="SUITE", help="suite file or folder")
    pooling.add_argument("-k", "--depth", type=at_least(1), help="pool depth (default: 20)")
    add_systems_option(pooling)
    pooling.add_argument("--no-extra", action="store_true", help="pool only the configured systems")
    pooling.add_argument(
        "--embed",
        action="store_true",
        help=f"go ahead with an embedding estimated past {EMBED_WITHOUT_ASKING_S:.0f} s",
    )
    export_ = actions.add_parser(
        "export",
        parents=[pooling],
        help="write the unjudged targets of the pooled top k to a judging sheet",
        description="Run the configured systems plus BM25 and dense on other chunkings over a "
        "suite; write every target in the union of their top k that has no judgment to a "
        "judging sheet (CSV or JSONL by extension).",
    )
    export_.add_argument(
        "-o", "--output", type=Path, required=True, help="sheet to write (.csv or .jsonl)"
    )
    export_.set_defaults(func=export)
    merge_ = actions.add_parser(
        "merge",
        help="merge a graded judging sheet into the suite file",
        description="Merge the grades of a judging sheet into the suite file; a grade that "
        "contradicts an existing judgment stops the merge unless --overwrite is given.",
    )
    merge_.add_argument("suite", type=Path, metavar="SUITE", help="suite file or folder")
    merge_.add_argument("sheet", type=Path, metavar="SHEET", help="graded sheet (.csv or .jsonl)")
    merge_.add_argument(
        "--overwrite", action="store_true", help="replace judgments the sheet contradicts"
    )
    merge_.set_defaults(func=lambda args: merge(args.suite, args.sheet, args.overwrite))
    difficulty_ = actions.add_parser(
        "difficulty",
        parents=[pooling],
        help="measure each query's difficulty from the pool",
        description="Print where each query's stored difficulty differs from the one measured "
        "from the pool (exit 1 when any does and nothing was written).",
    )
    difficulty_.add_argument(
        "--write", action="store_true", help="store the result in the suite file"
    )
    difficulty_.set_defaults(func=difficulty)
    agree_ = actions.add_parser(
        "agree",
        help="agreement of a second judging pass with the suite's grades",
        description="Print the agreement of a second judging pass with the suite's grades and "
        "every disagreement; write the disagreements as a blind sheet for a third reader, or "
        "store that reader's decisions.",
    )
    agree_.add_argument("suite", type=Path, metavar="SUITE", help="suite file or folder")
    agree_.add_argument("sheet", type=Path, metavar="SHEET", help="the second pass's sheet")
    agree_.add_argument(
        "--write",
        action="store_true",
        help="store the result in the suite file (the third reading's decisions; needs --third)",
    )
    agree_.add_argument(
        "--third-sheet",
        type=Path,
        metavar="PATH",
        help="write the disagreements as a blind sheet for a third reader (needs --output)",
    )
    agree_.add_argument(
        "--seed",
        type=at_least(0),
        help="seed of the readings' order on the third sheet (default: drawn and printed)",
    )
    agree_.add_argument(
        "--third", type=Path, metavar="SHEET", help="the third reader's decided sheet"
    )
    agree_.add_argument(
        "-o",
        "--output",
        type=Path,
        dest="record",
        metavar="DIR",
        help="folder for the second pass, the disagreements and the third sheet's key",
    )
    agree_.set_defaults(func=lambda args: agree(args.suite, args.sheet, args))


def _pooled(args: argparse.Namespace):
    """(suite, system names, target ranks, depth) of the configured and extra systems."""
    from rageval_pipeline.core.curation import pool, pool_cost
    from rageval_pipeline.core.io import paths
    from rageval_pipeline.core.suites.golden import load_suite
    from rageval_pipeline.core.systems import load_systems

    depth = args.depth or pool.DEFAULT_DEPTH
    suite = load_suite(args.suite)
    systems = dict(load_systems(args.systems))
    extra = {} if args.no_extra else pool.extra_systems()
    systems |= {n: s for n, s in extra.items() if n not in systems}
    embeddings = paths.storage_dir() / "embeddings"
    estimate = _check_cost(pool_cost.pending(suite, systems, embeddings), embeddings, args, extra)
    start = time.perf_counter()

    def log(line: str) -> None:  # every line with the time since pooling started
        print(f"[{time.perf_counter() - start:6.1f} s] {line}", file=sys.stderr, flush=True)

    log(f"pooling {len(suite.queries)} queries with {len(systems)} systems: {', '.join(systems)}")
    built: dict[str, dict] = {}
    runs = pool.run_systems(
        suite,
        systems,
        max(depth, pool.RUN_DEPTH),
        embeddings_dir=embeddings,
        base_dir=args.systems.parent,
        log=log,
        built=built.__setitem__,
    )
    if estimate is not None:  # what a user checks the estimate against
        done = [meta for meta in built.values() if meta.get("embedded")]
        n = estimate.sample + sum(meta["embedded"] for meta in done)
        took = estimate.load_s + estimate.sample_s + sum(meta["seconds"] for meta in done)
        log(f"embedded {n:,} chunks in {took:.1f} s (estimated {_duration(estimate.seconds)})")
    return suite, list(systems), pool.target_ranks(suite, systems, runs, depth), depth


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _check_cost(
    todo: Pending, embeddings: Path, args: argparse.Namespace, extra: Iterable[str]
) -> Measured | None:
    """Say what the embedding will cost: at once by the cost recorded here, then as measured
    now on a sample of the texts (the model loaded); refuse one measured past
    EMBED_WITHOUT_ASKING_S without --embed, naming the ways around it."""
    import os

    from rageval_pipeline.core.curation import pool_cost
    from rageval_pipeline.core.errors import InputError

    if not todo.total:
        return None
    each = ", ".join(f"{name} {n:,}" for name, n in todo.counts.items())
    head = f"{todo.total:,} chunks to embed on the CPU ({each})"
    if recorded := pool_cost.by_record(todo):
        seconds, entry = recorded
        ago = _duration(max(time.time() - entry.recorded_at, 0.0))
        print(
            f"pool: {head}: about {_duration(seconds)} by the cost recorded here {ago} ago "
            f"(load {entry.load_average:.1f}, now {os.getloadavg()[0]:.1f}), plus loading the "
            "model; measuring it now",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(f"pool: {head}: loading the model to measure the cost", file=sys.stderr, flush=True)
    measured = pool_cost.measure(todo, embeddings)
    cost = (
        f"about {_duration(measured.seconds)} in all, measured now (model loaded in "
        f"{measured.load_s:.1f} s, {measured.sample:,} chunks embedded in "
        f"{measured.sample_s:.1f} s as a sample, kept)"
    )
    if measured.seconds <= EMBED_WITHOUT_ASKING_S or args.embed:
        print(f"pool: {cost}", file=sys.stderr, flush=True)
        return measured
    skip = [n for n in todo.texts if n in extra]
    ways = "add --embed to go ahead"
    if skip:
        ways += f", --no-extra to leave out {', '.join(skip)}"
    raise InputError("pool", f"{head}: {cost}: {ways}, or pool with BM25 systems only (--systems)")


def export(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.curation import pool, sheets

    sheets.sheet_kind(args.output)  # refuse a bad sheet name before the slow part
    suite, systems, ranks, depth = _pooled(args)
    entries = pool.unjudged(suite, ranks)
    sheets.write_sheet(entries, args.output)
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

    from rageval_pipeline.core.curation import pool, rewrite
    from rageval_pipeline.core.suites.golden import resolve_suite_file

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

        rewrite.rewrite_suite(resolve_suite_file(args.suite), edit)
        print(f"stored {len(changed)} changed difficulties")
        return 0
    return 1 if changed else 0


def merge(suite_path: Path, sheet: Path, overwrite: bool) -> int:
    from rageval_pipeline.core.curation import judging
    from rageval_pipeline.core.suites.golden import resolve_suite_file

    suite_file = resolve_suite_file(suite_path)
    return _merged(judging.merge_sheet(suite_file, sheet, overwrite=overwrite), sheet, suite_file)


def _merged(result: MergeResult, sheet: Path, suite_file: Path) -> int:
    """Say what a merge did (its conflicts or near-duplicates on stderr: exit 2)."""
    if result.conflicts:
        for conflict in result.conflicts:
            print(f"conflict: {conflict.describe(sheet)}", file=sys.stderr)
        print(
            f"error: {sheet}: {len(result.conflicts)} grade(s) contradict existing judgments; "
            "nothing written (re-run with --overwrite to replace them)",
            file=sys.stderr,
        )
        return 2
    if result.inconsistent:
        for problem in result.inconsistent:
            print(f"error: {problem}", file=sys.stderr)
        print(
            f"error: {sheet}: {len(result.inconsistent)} near-duplicate pair(s) graded "
            "differently; nothing written",
            file=sys.stderr,
        )
        return 2
    print(
        f"merged {sheet} into {suite_file}: {result.added} added, "
        f"{result.overwritten} overwritten, {result.unchanged} unchanged, "
        f"{result.skipped} skipped (no grade)"
    )
    return 0


def agree(suite_path: Path, sheet: Path, args: argparse.Namespace) -> int:
    """Print the agreement of a second pass with the suite and every disagreement; write the
    blind third-reading sheet (`--third-sheet`), or store the third reading's decisions
    (`--third --write`); with --output DIR keep both readings (and the decisions)."""
    import secrets

    from rageval_pipeline.core.curation import judging, sheets, third
    from rageval_pipeline.core.errors import InputError
    from rageval_pipeline.core.suites.golden import load_suite, resolve_suite_file

    if args.write and args.third is None:
        raise InputError(
            "--write",
            "a disagreement is decided by a third reading, not by rule: write its sheet with "
            "--third-sheet PATH --output DIR, have it graded, then --third PATH --write",
        )
    if args.third_sheet is not None:
        sheets.sheet_kind(args.third_sheet)
        if args.record is None:
            raise InputError("--third-sheet", "give --output DIR: the sheet's key is kept there")
    path = resolve_suite_file(suite_path)
    suite = load_suite(path)
    report = third.compare(suite, sheet)
    decided = third.decisions(suite, args.third, report) if args.third is not None else None
    _print_agreement(report, suite.judgment_count)
    if args.third_sheet is not None:
        seed = secrets.randbelow(2**31) if args.seed is None else args.seed
        rows, key = third.write_blind(suite, report, args.third_sheet, args.record, seed)
        print(f"wrote {rows} disagreement(s) to {args.third_sheet} (seed {seed}; key {key})")
    if args.write:  # the decisions, read once above, are stored as `pool merge` stores a sheet
        rows = decided.values()
        result = judging.merge_rows(
            path, suite, args.third, rows, overwrite=True, move_primary=True
        )
        if status := _merged(result, args.third, path):
            return status
    if args.record is not None:
        written = third.record(suite, report, args.record, decided)
        print(f"recorded {', '.join(str(p) for p in written)}")
    return 0


def _print_agreement(report: RoundReport, suite_pairs: int) -> None:
    from rageval_pipeline.core.curation.readings import LOW_OVERLAP

    def number(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    pairs, share = report.pairs, report.pairs / suite_pairs
    evidence = ""
    if report.both_relevant:
        evidence = (
            f"evidence F1 over the {report.both_relevant} pairs both grade >= 1: mean "
            f"{number(report.mean_f1)}, {report.low_overlap} below {LOW_OVERLAP}\n"
        )
    print(
        f"{pairs} pairs graded twice: {share:.1%} of the suite's {suite_pairs} judged "
        f"pairs\nraw agreement {report.raw:.3f} ({report.agree} of {pairs})\n"
        f"weighted kappa: linear {number(report.kappa_linear)}, "
        f"quadratic {number(report.kappa_quadratic)}\n"
        f"binary kappa: grade >= 1 {number(report.kappa_relevant)}, "
        f"grade >= 2 {number(report.kappa_highly)}\n"
        + evidence
        + "confusion (rows: suite grade, columns: second grade):\n"
        "        0     1     2     3\n"
        + "".join(
            f"  {g}" + "".join(f"{n:6d}" for n in row) + "\n"
            for g, row in enumerate(report.confusion)
        )
        + f"{len(report.disagreements)} disagreements, for a third reading:"
    )
    for p in report.disagreements:
        f1 = "" if p.evidence_f1 is None else f", evidence F1 {p.evidence_f1:.2f}"
        print(f"  {p.query_id} {p.target}: suite {p.first.grade}, second {p.second.grade}{f1}")
