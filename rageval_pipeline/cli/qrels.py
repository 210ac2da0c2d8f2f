"""`rageval qrels SUITE (--chunking SPEC | --passages RUN) -o FILE`: the TREC qrels a suite's
evidence spans derive for a chunking (chunk ids as the pipeline names them) or for the passages
a run names (`doc:span:start-end`), for trec_eval or ranx, and for a reader to check any grade.
The grades are `EvidenceSet.qrels`, the function the pipeline judges such a run by."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "qrels",
        help="write the qrels a suite's evidence spans derive for a chunking or a run's passages",
        description="Write the chunk-level TREC qrels (`query 0 id grade`) a golden suite's "
        "evidence spans derive (docs/suite-format.md, derived grades) for a chunking or for "
        "the passages a run names. Every chunk sharing a token with a judged span is listed, "
        "with 0 when it earns no nugget's grade; unlisted ids are unjudged.",
    )
    parser.add_argument("suite", type=Path, metavar="SUITE", help="suite file or folder")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--chunking",
        metavar="SPEC",
        help="a chunking as YAML, e.g. '{strategy: fixed, size: 64, overlap: 0}' "
        "(`reference`: the suite's own)",
    )
    which.add_argument(
        "--passages",
        type=Path,
        metavar="RUN",
        help="a run whose ids are passages `doc:span:start-end` (a team's own chunker)",
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="qrels file to write")
    parser.set_defaults(func=run_qrels)


def run_qrels(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.errors import InputError
    from rageval_pipeline.core.io.formats import read_run
    from rageval_pipeline.core.storage.files import write_text
    from rageval_pipeline.core.suites.golden import load_suite, resolve_suite_file
    from rageval_pipeline.core.suites.loaders import suite_qrels

    if args.chunking is None and args.passages is None:
        raise InputError(None, "give --chunking or --passages: the units to derive grades for")
    suite = load_suite(resolve_suite_file(args.suite))
    if args.chunking is not None:
        qrels = suite_qrels(suite, chunking=_chunking(args.chunking))
    else:
        qrels = suite_qrels(suite, run=read_run(args.passages), source=args.passages)
    lines = [f"{q} 0 {d} {g}\n" for q, d, g in qrels[["query_id", "doc_id", "relevance"]].values]
    try:
        write_text(args.output, "".join(lines))
    except OSError as error:
        raise InputError(args.output, f"cannot write it ({error.strerror or error})") from None
    queries = qrels["query_id"].nunique()
    print(f"{args.output}: {len(lines)} judged (query, id) pairs of {queries} queries")
    return 0


def _chunking(spec: str):
    """The `--chunking` YAML as a ChunkingConfig; a bad one refused in one line."""
    import yaml
    from pydantic import ValidationError

    from rageval_pipeline.core.errors import InputError
    from rageval_pipeline.core.suites.chunking import ChunkingConfig

    try:
        raw = yaml.safe_load(spec)
        return ChunkingConfig.model_validate(raw)
    except yaml.YAMLError as error:
        raise InputError("--chunking", f"not YAML ({' '.join(str(error).split())})") from None
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(map(str, first["loc"])) or "chunking"
        raise InputError("--chunking", f"{field}: {first['msg']}") from None
