"""Computing measures for every query of a run at once.

`prepare` puts the run in trec_eval order and joins it to the qrels once; `kernels` computes
each measure for every query from that.

Semantics (docs/measures.md): a query is evaluated when the qrels give it at least one label >= 1;
such a query with no retrieved document scores 0 on every measure; queries without a relevant
judgment are left out and listed by `unjudged_queries`; a doc id twice for one query is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.keys import arrow_strings
from rageval_pipeline.core.io.ranking import RankedRun
from rageval_pipeline.core.measures import names
from rageval_pipeline.core.measures.condensed import judged_only
from rageval_pipeline.core.measures.join import Judgments
from rageval_pipeline.core.measures.kernels import KERNELS
from rageval_pipeline.core.measures.prepare import JUDGED_LEVEL, distinct_query_ids, prepare


def evaluate(
    qrels: pd.DataFrame,
    run: pd.DataFrame | RankedRun,
    measures: Sequence[str | names.Measure],
    judgments: Judgments | None = None,
) -> pd.DataFrame:
    """Per-query values: columns query_id, measure (canonical name), value.

    `run` is a RUN table, or a reader's RankedRun (`formats.read_ranked_run`), taken as it is.

    Measures that use qrels get a row for every judged query (a label >= 1), retrieved or not;
    Diversity@k and Clustering@k also for every other query of the run. Rows come by measure in
    the order asked, then by query id. `judgments`: `Judgments.of(qrels)`, when the caller
    made it ahead (while the run was read).
    """
    wanted = list(dict.fromkeys(names.parse_measure(m) for m in measures))
    for measure in wanted:
        if measure.USES_SPANS:
            raise InputError(
                None,
                f"{measure} is computed from evidence spans, which these judgments lack",
                field="measure",
            )
    data = prepare(qrels, run, judgments)
    # Condensed variants rank the judged documents only; the judged queries are the same.
    condensed = None
    if any(m.judged for m in wanted):
        table = run.table().to_pandas() if isinstance(run, RankedRun) else run
        condensed = prepare(qrels, judged_only(qrels, table), data.judgments)
    queries, labels, values = [], [], []
    for measure in wanted:
        source = condensed if measure.judged and condensed is not None else data
        per_query = KERNELS[type(measure)](source, measure)
        keep = source.judged if measure.USES_QRELS else source.judged | source.in_run
        queries.append(source.universe[keep])
        labels.append(np.full(int(keep.sum()), str(measure), dtype=object))
        values.append(per_query[keep])
    if not wanted:
        return pd.DataFrame(
            {"query_id": pd.Series(dtype="str"), "measure": pd.Series(dtype="str"), "value": []}
        )
    return pd.DataFrame(
        {
            "query_id": pd.array(np.concatenate(queries), dtype="str"),
            "measure": pd.array(np.concatenate(labels), dtype="str"),
            "value": np.concatenate(values).astype(np.float64),
        }
    )


def unjudged_queries(qrels: pd.DataFrame, run: pd.DataFrame | RankedRun) -> list[str]:
    """Query ids of the run or the qrels with no label >= 1: left out of every qrels measure."""
    relevant = qrels["relevance"].to_numpy(dtype=np.int64, na_value=0) >= JUDGED_LEVEL
    judged = pc.unique(arrow_strings(qrels["query_id"]).filter(pa.array(relevant)))
    seen = pc.unique(
        pa.concat_arrays([distinct_query_ids(table) for table in (run, qrels)])
    ).drop_null()
    left_out = seen.filter(pc.invert(pc.is_in(seen, value_set=judged)))
    return left_out.take(pc.sort_indices(left_out)).to_pylist()
