"""Reading qrels and runs and scoring them, for `rageval eval` and `rageval compare`
(`score`): the measures asked for, the judgments, the per-query values and the notes on stderr
about queries left out or scoring 0."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures.defaults import EVAL_MEASURES

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from rageval_pipeline.core.io.ranking import RankedRun
    from rageval_pipeline.core.measures.compute import Columns
    from rageval_pipeline.core.measures.join import Judgments
    from rageval_pipeline.core.measures.names import Measure

    # A qrels table (Arrow on `eval`'s Arrow path, else pandas) and its side of the join.
    Qrels = tuple[pd.DataFrame | pa.Table, Judgments]


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


def read_judgments(
    path: str, runs: list[str], document_level: bool, *, arrow: bool = False
) -> Qrels:
    """The qrels and their side of the join (`Judgments`), for any number of runs; `arrow`:
    the table in Arrow (`eval`'s Arrow path), else pandas.

    `--document-level` is refused for chunk-level qrels, which no document id can match (every
    score would be 0). The rule, never a guess from some of the ids: the qrels are chunk-level
    when every judged id has the chunk-id form `doc:chunk:n` (`core.suites.chunking`)."""
    from rageval_pipeline.core.io.chunk_ids import is_chunk_id
    from rageval_pipeline.core.io.formats import read_keyed_qrels, read_keyed_qrels_table
    from rageval_pipeline.core.measures.join import Judgments

    try:
        table, keys = (read_keyed_qrels_table if arrow else read_keyed_qrels)(path)
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
    """`score_columns` as the per-query table (`compute.per_query_table`)."""
    from rageval_pipeline.core.measures.compute import per_query_table

    return per_query_table(score_columns(qrels, qrels_path, run, path, measures, suite))


def score_columns(
    qrels: Qrels,
    qrels_path: str,
    run: RankedRun | pd.DataFrame,
    path: str,
    measures: list[Measure],
    suite: str | None = None,
) -> Columns:
    """The run's per-query values (`compute.per_query_columns`), the span measures' from
    `suite`; notes on stderr for the queries left out or scoring 0."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from rageval_pipeline.core.measures import unjudged_queries
    from rageval_pipeline.core.measures.compute import per_query_columns
    from rageval_pipeline.core.measures.prepare import distinct_query_ids

    table, judgments = qrels
    by_qrels = [m for m in measures if not m.USES_SPANS]
    # The queries left out are found in a second thread while the measures are computed
    # (scoring leaves a core idle: 0.02-0.03 s of 0.5 s on 50,000 queries); noted first.
    with ThreadPoolExecutor(max_workers=1) as pool:
        unjudged = pool.submit(unjudged_queries, table, run)
        try:
            columns = per_query_columns(table, run, by_qrels, judgments)
        finally:
            if left_out := unjudged.result():
                rule = f"relevant judgment (label >= 1) in {qrels_path}"
                _note(
                    path,
                    left_out,
                    f"{{n}} query has no {rule} and is left out (only queries with one are scored)",
                    f"{{n}} queries have no {rule} and are left out (only queries with one "
                    "are scored)",
                )
    if len(by_qrels) < len(measures):
        spanned = _span_scores(suite, table, run, [m for m in measures if m.USES_SPANS])
        names = ("query_id", "measure", "value")
        columns = tuple(
            np.concatenate([c, spanned[n].to_numpy(c.dtype)])
            for c, n in zip(columns, names, strict=True)
        )
    if not len(columns[0]):
        raise InputError(
            qrels_path, "no query has a relevant judgment (label >= 1): nothing to evaluate"
        )
    scored = pc.unique(pa.array(columns[0], pa.large_string()))
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
    return columns
