"""`rageval eval` (trec_eval-style scores of one run) and `rageval compare` (two runs, tested).

Named for what it does to runs, scoring them; `core.measures.evaluate` is the one `evaluate`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rageval_pipeline.cli import at_least, ppi_scores
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures.defaults import EVAL_MEASURES

if TYPE_CHECKING:
    import pandas as pd

    from rageval_pipeline.core.io.ranking import RankedRun
    from rageval_pipeline.core.measures.join import Judgments
    from rageval_pipeline.core.measures.names import Measure

    Qrels = tuple[pd.DataFrame, Judgments]  # a qrels table and its side of the join

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
    common.add_argument("--format", choices=FORMATS, default="table")
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
    parser.add_argument("run_a", metavar="RUN_A")
    parser.add_argument("run_b", metavar="RUN_B")
    parser.add_argument(
        "--permutations", type=at_least(1), default=10_000, help="randomization test resamples"
    )
    parser.add_argument("--seed", type=at_least(0), default=0)
    parser.set_defaults(func=run_compare, refuse=parser.error)


def parse_measures(args: argparse.Namespace) -> list[Measure]:
    """The measures asked for, parsed once here; a bad one exits 2, as argparse would.
    Parsed here rather than while parsing arguments: naming a measure imports pydantic
    (0.15 s), which `eval` spends while its run is read."""
    from rageval_pipeline.core.measures import parse_measure

    measures = []
    for text in args.measures or EVAL_MEASURES:
        try:
            measures.append(parse_measure(text))
        except InputError as exc:
            args.refuse(f"argument -m/--measure: {exc.problem}")
    return measures


def read_run_file(path: str, document_level: bool) -> RankedRun | pd.DataFrame:
    from rageval_pipeline.core.io.formats import read_ranked_run, read_run
    from rageval_pipeline.core.io.ranking import to_document_level

    # A TREC run goes to the measures engine as its reader left it (checked, in Arrow).
    return to_document_level(read_run(path)) if document_level else read_ranked_run(path)


def _inputs_reading_the_run_ahead(
    args: argparse.Namespace,
) -> tuple[list[str], Qrels, RankedRun | pd.DataFrame]:
    """`eval`'s measures, qrels and run, the run read in a thread started first thing: its
    bytes while numpy and pyarrow import, then its CSV parse, checks and trec_eval order (I/O
    and Arrow release the GIL) while this thread imports pandas and the measures engine
    (0.6 s), names the measures, reads the qrels and makes their side of the join. Those come
    first, so their errors do; the thread is not waited for then.

    The one speed trick kept in the CLI (bench/README.md, "Issue 23"): `rageval eval` on the
    5M-row bench files, side by side in one script run at load 2 (2026-11-26, 7 runs each),
    took a median of 2.92 s with it against 4.05 s without. At load 10-11 it was 23.0 s against
    24.5 s, within that load's noise: it needs an idle core."""
    from concurrent.futures import ThreadPoolExecutor

    from rageval_pipeline.core.io.bounds import input_bytes  # (no pydantic: see `bounds`)

    pool = ThreadPoolExecutor(max_workers=1)  # one thread: the parse follows the read
    try:
        raw = None if args.document_level else pool.submit(input_bytes, args.run)
        from rageval_pipeline.core.io.delimited import fetch
        from rageval_pipeline.core.io.formats import TREC_RUN, read_ranked_run

        if raw is not None:
            ahead = pool.submit(lambda: read_ranked_run(fetch(*raw.result(), TREC_RUN)))
        import rageval_pipeline.core.measures.compute  # noqa: F401 (imported while it parses)

        measures = parse_measures(args)

        qrels = read_judgments(args.qrels, [args.run], args.document_level)
        if raw is None:
            return measures, qrels, read_run_file(args.run, document_level=True)
        return measures, qrels, ahead.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def read_judgments(path: str, runs: list[str], document_level: bool) -> Qrels:
    """The qrels and their side of the join (`Judgments`), for any number of runs.

    `--document-level` is refused for chunk-level qrels, which no document id can match (every
    score would be 0). The rule, never a guess from some of the ids: the qrels are chunk-level
    when every judged id has the chunk-id form `doc:chunk:n` (`core.suites.chunking`)."""
    from rageval_pipeline.core.io.chunk_ids import is_chunk_id
    from rageval_pipeline.core.io.formats import read_keyed_qrels
    from rageval_pipeline.core.measures.join import Judgments

    try:
        table, keys = read_keyed_qrels(path)
    except InputError as error:
        raise _swapped(path, runs) or error from None
    if document_level and is_chunk_id(table["doc_id"]).all():
        raise InputError(
            path,
            "every judged id is a chunk id (doc:chunk:n): these are chunk-level judgments, "
            "which --document-level cannot match; score the chunk run without it",
        )
    return table, Judgments.of(table, keys)


def _swapped(qrels: str, runs: list[str]) -> InputError | None:
    """When QRELS, which did not read as qrels, reads as a run, and a RUN reads as qrels but
    not as a run, the two were given in each other's place. Read only on that error path."""
    from rageval_pipeline.core.io.formats import read_qrels, read_run

    if not _reads(read_run, qrels):
        return None
    for run in runs:
        if _reads(read_qrels, run) and not _reads(read_run, run):
            return InputError(
                qrels,
                f"reads as a run and {run} as qrels: the arguments look swapped "
                "(QRELS comes first, then the run)",
            )
    return None


def _reads(reader: Callable[[str], object], path: str) -> bool:
    try:
        reader(path)
    except InputError:
        return False
    return True


def _note(path: str, queries: list[str], one: str, many: str) -> None:
    """One line on stderr: `one` or `many` with the count filled in, then the first queries."""
    text = (one if len(queries) == 1 else many).format(n=len(queries))
    shown = ", ".join(queries[:5]) + (" ..." if len(queries) > 5 else "")
    print(f"note: {path}: {text}: {shown}", file=sys.stderr)


def _span_scores(
    suite: str | None, qrels: pd.DataFrame, run: RankedRun | pd.DataFrame, measures: list[Measure]
) -> pd.DataFrame:
    """The span measures of the run, over the suite's spans of the queries the qrels judge."""
    from pathlib import Path

    import pandas as pd

    from rageval_pipeline.core.measures.spans import evaluate_spans
    from rageval_pipeline.core.suites.derived import EvidenceSet
    from rageval_pipeline.core.suites.golden import load_suite, resolve_suite_file
    from rageval_pipeline.core.suites.loaders import suite_spans, suite_tables

    if suite is None:
        names = ", ".join(str(m) for m in measures)
        raise InputError(
            None, f"{names}: computed from evidence spans; name their suite with --suite"
        )
    loaded = load_suite(resolve_suite_file(Path(suite)))
    spans = suite_spans(loaded)
    spans = spans[spans["query_id"].isin(qrels["query_id"])]
    ranked = run.table().to_pandas() if not isinstance(run, pd.DataFrame) else run
    corpus = suite_tables(loaded).corpus
    evidence = EvidenceSet.for_ids(spans, corpus, loaded.chunking, ranked)
    return evaluate_spans(ranked, evidence.spans, evidence.units, evidence.tokens, measures)


def score_run(
    qrels: Qrels,
    qrels_path: str,
    run: RankedRun | pd.DataFrame,
    path: str,
    measures: list[Measure],
    suite: str | None = None,
) -> pd.DataFrame:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    from rageval_pipeline.core.measures import evaluate, unjudged_queries
    from rageval_pipeline.core.measures.prepare import distinct_query_ids

    table, judgments = qrels
    if left_out := unjudged_queries(table, run):
        rule = f"relevant judgment (label >= 1) in {qrels_path}"
        _note(
            path,
            left_out,
            f"{{n}} query has no {rule} and is left out (only queries with one are scored)",
            f"{{n}} queries have no {rule} and are left out (only queries with one are scored)",
        )
    by_qrels = [m for m in measures if not m.USES_SPANS]
    per_query = evaluate(table, run, by_qrels, judgments)
    if len(by_qrels) < len(measures):
        spanned = _span_scores(suite, table, run, [m for m in measures if m.USES_SPANS])
        per_query = pd.concat([per_query, spanned], ignore_index=True)
    if per_query.empty:
        raise InputError(
            qrels_path, "no query has a relevant judgment (label >= 1): nothing to evaluate"
        )
    scored = pa.array(per_query["query_id"].unique(), pa.large_string())
    in_run = distinct_query_ids(run)
    if not pc.any(pc.is_in(in_run, value_set=scored)).as_py():
        raise InputError(path, f"no query of the run is judged in {qrels_path}")
    absent = scored.filter(pc.invert(pc.is_in(scored, value_set=in_run)))
    if len(absent):
        _note(
            path,
            sorted(absent.to_pylist()),
            f"{{n}} judged query of {qrels_path} is not in the run and scores 0 on every "
            "measure (as trec_eval -c scores it; plain trec_eval skips it)",
            f"{{n}} judged queries of {qrels_path} are not in the run and score 0 on every "
            "measure (as trec_eval -c scores them; plain trec_eval skips them)",
        )
    return per_query


def run_eval(args: argparse.Namespace) -> int:
    measures, qrels, run = _inputs_reading_the_run_ahead(args)
    population = ppi_scores.population(
        args, qrels, lambda path: read_judgments(path, [args.run], args.document_level)
    )
    per_query = score_run(qrels, args.qrels, run, args.run, measures, args.suite)
    ppi = {}
    if population:
        from rageval_pipeline.core.statistics.ppi import nested, ppi_means

        sample, llm = population
        by_llm = score_run(llm, args.llm_qrels, run, args.run, measures)
        named = [str(m) for m in measures]
        ppi = ppi_means(nested(per_query), nested(by_llm), sample, named, where=args.qrels)
    del run  # (its arrays are freed before the output is built)

    import pandas as pd

    from rageval_pipeline.core.measures.aggregate import mean_table

    means = mean_table(per_query, intervals=False)  # printed without intervals
    if args.format == "json":
        nested: dict[str, dict[str, float]] = {}
        for query_id, measure, value in per_query.itertuples(index=False):
            nested.setdefault(query_id, {})[measure] = value
        document = {"mean": dict(zip(means["measure"], means["value"], strict=True))}
        if ppi:
            document["ppi"] = {m: ppi_scores.as_json(e) for m, e in ppi.items()}
        print(json.dumps(document | {"per_query": nested}, indent=2))
        return 0
    rows = means.assign(query_id="all")[["measure", "query_id", "value"]]
    if args.per_query:
        ordered = per_query.sort_values(["query_id"], kind="stable")
        rows = pd.concat([ordered[["measure", "query_id", "value"]], rows], ignore_index=True)
    if args.format == "csv":
        print(rows.to_csv(index=False, float_format="%.6f"), end="")
    else:
        for measure, query_id, value in rows.itertuples(index=False):
            print(f"{measure:<12}\t{query_id}\t{value:.4f}")
        for measure, estimate in ppi.items():
            print(ppi_scores.line(measure, estimate))
    return 0


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
