"""`rageval eval` (trec_eval-style scores of one run) and `rageval compare` (two runs, tested).

Named for what it does to runs, scoring them; `core.measures.evaluate` is the one `evaluate`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from rageval_pipeline.cli import at_least, eval_process, ppi_scores
from rageval_pipeline.cli.scoring import (
    parse_measures,
    read_judgments,
    read_run_file,
    score_columns,
    score_run,
)
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures.defaults import EVAL_MEASURES

if TYPE_CHECKING:
    import pandas as pd

    from rageval_pipeline.cli.scoring import Qrels
    from rageval_pipeline.core.io.ranking import RankedRun
    from rageval_pipeline.core.measures.compute import Columns
    from rageval_pipeline.core.statistics.ppi import PpiEstimate

FORMATS = ("table", "json", "csv")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("qrels", metavar="QRELS", help="TREC or BEIR qrels, or Parquet")
    common.add_argument(
        "-m",
        "--measure",
        action="append",
        dest="measures",
        metavar="MEASURE",
        help=f"e.g. nDCG@10, RR, P(rel=2)@5 (repeatable; default {' '.join(EVAL_MEASURES)})",
    )
    common.add_argument(
        "--suite",
        metavar="SUITE",
        help="a golden suite (file or folder) whose evidence spans and corpus the span "
        "measures need (EvidenceRecall@10, TokenPrecision@512t, ...): the run's ids are its "
        "documents, its reference chunks or passages doc:span:start-end",
    )
    common.add_argument(
        "--format", choices=FORMATS, default="table", help="output format (default: %(default)s)"
    )
    common.add_argument(
        "--document-level",
        action="store_true",
        help="rank each source document by its best chunk before scoring (a chunk run, such "
        "as the pipeline's <system>/run Parquet, against document qrels; refused when every "
        "judged id is a chunk id doc:chunk:n)",
    )
    ppi_scores.add_options(common)

    parser = subparsers.add_parser(
        "eval",
        parents=[common],
        help="score a run like trec_eval",
        description="Print measure, query id ('all' for the mean) and value, tab separated.",
    )
    parser.add_argument("run", metavar="RUN", help="TREC run or Parquet run")
    parser.add_argument("-q", "--per-query", action="store_true", help="also print each query")
    parser.set_defaults(func=run_eval, refuse=parser.error)

    parser = subparsers.add_parser(
        "compare",
        parents=[common],
        help="compare two runs with paired significance tests",
        description="Means, B - A with a 95% CI, paired t-test and randomization test p-values "
        "(Holm-corrected across measures).",
    )
    parser.add_argument("run_a", metavar="RUN_A", help="the run compared against (A)")
    parser.add_argument("run_b", metavar="RUN_B", help="the run compared (B)")
    parser.add_argument(
        "--permutations", type=at_least(1), default=10_000, help="randomization test resamples"
    )
    parser.add_argument(
        "--seed",
        type=at_least(0),
        default=0,
        help="seed of the randomization test's resamples (default: %(default)s)",
    )
    parser.set_defaults(func=run_compare, refuse=parser.error)


def _inputs_reading_the_run_ahead(
    args: argparse.Namespace,
) -> tuple[list[str], Qrels, RankedRun | pd.DataFrame]:
    """`eval`'s measures, qrels and run, the run read in a thread started first thing: its
    bytes while numpy and pyarrow import, then its CSV parse, checks and trec_eval order (I/O
    and Arrow release the GIL) while this thread imports the measures engine, names the
    measures (pydantic, 0.15 s), reads the qrels and makes their side of the join. Those come
    first, so their errors do; the thread is not waited for then.

    A speed trick of the CLI, beside `eval_process` (bench/README.md, "Fast paths in one
    place"): `rageval eval` on the 5M-row bench files, side by side in one script run at load 2
    (2026-11-26, 7 runs each), took a median of 2.92 s with it against 4.05 s without. At load
    10-11 it was 23.0 s against 24.5 s, within that load's noise: it needs an idle core."""
    from concurrent.futures import ThreadPoolExecutor

    from rageval_pipeline.core.io.bounds import input_bytes  # (no pydantic: see `bounds`)

    pool = ThreadPoolExecutor(max_workers=1)  # one thread: the parse follows the read
    try:
        raw = None if args.document_level else pool.submit(input_bytes, args.run)
        arrow = raw is not None and args.llm_qrels is None
        if arrow:
            eval_process.pyarrow_without_pandas()
        eval_process.arrow_pool_keeping_pages()
        from rageval_pipeline.core.io.delimited import fetch
        from rageval_pipeline.core.io.formats import TREC_RUN, read_ranked_run

        if raw is not None:
            ahead = pool.submit(lambda: read_ranked_run(fetch(*raw.result(), TREC_RUN)))
        from rageval_pipeline.core.measures.compute import pandas_free  # (while it parses)

        measures = parse_measures(args)
        arrow = arrow and pandas_free(measures)
        qrels = read_judgments(args.qrels, [args.run], args.document_level, arrow=arrow)
        if raw is None:
            return measures, qrels, read_run_file(args.run, document_level=True)
        return measures, qrels, ahead.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def run_eval(args: argparse.Namespace) -> int:
    with eval_process.quiet_process():
        return _scored(args)


def _scored(args: argparse.Namespace) -> int:
    measures, qrels, run = _inputs_reading_the_run_ahead(args)
    population = ppi_scores.population(
        args, qrels, lambda path: read_judgments(path, [args.run], args.document_level)
    )
    columns = score_columns(qrels, args.qrels, run, args.run, measures, args.suite)
    ppi = {}
    if population:
        from rageval_pipeline.core.measures.compute import per_query_table
        from rageval_pipeline.core.statistics.ppi import nested, ppi_means

        sample, llm = population
        by_llm = score_run(llm, args.llm_qrels, run, args.run, measures)
        named = [str(m) for m in measures]
        by_human = per_query_table(columns)
        ppi = ppi_means(nested(by_human), nested(by_llm), sample, named, where=args.qrels)
    del run  # (its arrays are freed before the output is built)
    print_scores(columns, args.format, args.per_query, ppi)
    return 0


def print_scores(columns: Columns, form: str, per_query: bool, ppi: dict[str, PpiEstimate]) -> None:
    """`eval`'s output: each measure's mean over its queries ('all'), with `per_query` each
    query's values first (queries ascending, measures as asked), then any PPI estimates."""
    import numpy as np

    queries, measures, values = columns
    named = list(dict.fromkeys(measures))
    means = {m: values[measures == m].mean() for m in named}
    if form == "json":
        nested: dict[str, dict[str, float]] = {}
        for query_id, measure, value in zip(queries, measures, values, strict=True):
            nested.setdefault(query_id, {})[measure] = value
        document = {"mean": means}
        if ppi:
            document["ppi"] = {m: ppi_scores.as_json(e) for m, e in ppi.items()}
        print(json.dumps(document | {"per_query": nested}, indent=2))
        return
    rows = [(m, "all", v) for m, v in means.items()]
    if per_query:
        order = np.argsort(queries, kind="stable")
        each = zip(measures[order], queries[order], values[order], strict=True)
        rows = [*each, *rows]
    if form == "csv":
        import csv

        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(("measure", "query_id", "value"))
        out.writerows((m, q, f"{v:.6f}") for m, q, v in rows)
        return
    for measure, query_id, value in rows:
        print(f"{measure:<12}\t{query_id}\t{value:.4f}")
    for measure, estimate in ppi.items():
        print(ppi_scores.line(measure, estimate))


def run_compare(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.statistics.compare import compare_runs, mixed_levels, scored_level

    measures = parse_measures(args)
    dl = args.document_level
    qrels = read_judgments(args.qrels, [args.run_a, args.run_b], dl)
    population = ppi_scores.population(
        args, qrels, lambda path: read_judgments(path, [args.run_a, args.run_b], dl)
    )
    llm = population[1] if population else None
    run_a, run_b = read_run_file(args.run_a, dl), read_run_file(args.run_b, dl)
    if why := mixed_levels(scored_level(run_a.doc_id), scored_level(run_b.doc_id)):
        raise InputError(args.run_b, why)

    def scores(
        run: RankedRun | pd.DataFrame, path: str
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        by_llm = None if llm is None else score_run(llm, args.llm_qrels, run, path, measures)
        return score_run(qrels, args.qrels, run, path, measures, args.suite), by_llm

    (human_a, llm_a), (human_b, llm_b) = scores(run_a, args.run_a), scores(run_b, args.run_b)
    table = compare_runs(human_a, human_b, permutations=args.permutations, seed=args.seed)
    ppi = {}
    if population:
        named = [str(m) for m in measures]
        ppi = ppi_scores.compared(
            (human_a, human_b), (llm_a, llm_b), population[0], named, where=args.qrels
        )
    if args.format == "json" and ppi:
        records = json.loads(table.to_json(orient="records", double_precision=15))
        for record in records:
            record["ppi"] = {k: ppi_scores.as_json(e) for k, e in ppi[record["measure"]].items()}
        print(json.dumps(records, indent=2))
    elif args.format == "json":
        print(table.to_json(orient="records", indent=2))
    elif args.format == "csv":
        print(table.to_csv(index=False, float_format="%.6f"), end="")
    else:
        print(f"A: {args.run_a}\nB: {args.run_b}")
        print("measure     \tn\tmean A\tmean B\tB - A\t95% CI\t\tp t-test\tp random")
        for r in table.itertuples(index=False):
            print(
                f"{r.measure:<12}\t{r.n_queries}\t{r.mean_a:.4f}\t{r.mean_b:.4f}\t{r.delta:+.4f}"
                f"\t[{r.ci_low:+.4f}, {r.ci_high:+.4f}]\t{r.p_ttest_holm:.4f}"
                f"\t\t{r.p_randomization_holm:.4f}"
            )
        print("p-values are two-sided and Holm-corrected across the measures.")
        for measure, estimates in ppi.items():
            print(ppi_scores.line(f"{measure} B - A", estimates["delta"]))
    return 0
