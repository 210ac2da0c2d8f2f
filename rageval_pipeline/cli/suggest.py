"""`rageval suggest SHEET -o SHEET`: LLM-suggested 0-3 grades for a judging sheet.

The judge model comes from the environment (`RAGEVAL_JUDGE_*`, else `RAGEVAL_*`; see
docs/generation.md). Suggestions go to `suggested_grade`/`suggested_by`, never to `grade`.
Where human grades exist, prints Cohen's weighted kappa and Kendall's tau of the system
rankings under human vs LLM labels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from rageval_pipeline.cli import add_storage_option

    parser = subparsers.add_parser(
        "suggest",
        help="LLM-suggested relevance grades for a judging sheet",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("sheet", type=Path, metavar="SHEET", help="judging sheet (.jsonl)")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, dest="out", help="sheet to write (.jsonl)"
    )
    parser.add_argument("--samples", type=int, default=1, help="judge samples per pair")
    parser.add_argument(
        "--unjudged-only", action="store_true", help="skip pairs that already have a grade"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count the calls and tokens; call nothing"
    )
    add_storage_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.errors import InputError
    from rageval_pipeline.core.generation import config, labels
    from rageval_pipeline.core.generation.llm import LLM

    for path in (args.sheet, args.out):
        if path.suffix != ".jsonl":
            raise InputError(path, "a judging sheet for suggestions must end in .jsonl")
    rows = labels.read_sheet(args.sheet)
    try:
        llm = LLM(config.from_env("judge"), args.storage / "llm_cache", dry_run=args.dry_run)
        rows = labels.suggest(rows, llm, samples=args.samples, unjudged_only=args.unjudged_only)
    except config.GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    usage = llm.usage
    print(
        f"{'would make' if args.dry_run else 'made'} {usage.calls} call(s), {usage.cached} "
        f"cached; tokens in {usage.input_tokens}, out {usage.output_tokens} ({llm.label})"
    )
    if args.dry_run:
        return 0
    labels.write_sheet(args.out, rows)
    graded = [r for r in rows if r.suggested_by]
    unparseable = sum(r.suggested_grade is None for r in graded)
    print(f"{args.out}: {len(graded)} suggestion(s), {unparseable} unparseable")
    report = labels.agreement_with_humans(rows)
    if report.pairs:
        kappa = "n/a" if report.kappa_quadratic is None else f"{report.kappa_quadratic:.3f}"
        tau = "n/a" if report.kendall_tau is None else f"{report.kendall_tau:.3f}"
        print(
            f"agreement on {report.pairs} human-graded pair(s): weighted kappa (quadratic) "
            f"{kappa}; Kendall's tau of {len(report.systems)} system ranking(s) {tau}"
        )
    return 0
