"""`--llm-qrels` for `rageval eval` and `rageval compare`: PPI++ estimates (docs/statistics.md).

QRELS are then the human judgments of a recorded random sample of the population
(`--human-sample`, by default `<QRELS>.sample.json`), and the LLM qrels judge every query of
that population. Anything else is refused in one line: PPI is only valid on a random sample.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from rageval_pipeline.cli.scoring import Qrels
    from rageval_pipeline.core.statistics.ppi import PpiEstimate
    from rageval_pipeline.core.statistics.sampling import HumanSample

# What `--format json` prints of each estimate.
FIELDS = (
    "estimate",
    "ci_low",
    "ci_high",
    "n_human",
    "n_llm",
    "effective_n",
    "mde",
    "mde_human",
    "p_value",
)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--llm-qrels",
        metavar="FILE",
        help="LLM judgments of every query of the population; QRELS are then the human "
        "judgments of its recorded random sample, and PPI++ estimates are printed too",
    )
    parser.add_argument(
        "--human-sample",
        metavar="FILE",
        help="the sampling record (seed, size, frame) of the human-judged queries "
        "(default: QRELS.sample.json)",
    )
    parser.add_argument(
        "--frame",
        metavar="FILE",
        help="the frame committed when the population was generated (default: "
        "QRELS.frame.json; required by `rageval gate`, checked by the others when it exists)",
    )


def population(
    args: argparse.Namespace,
    human: Qrels,
    read_qrels: Callable[[str], Qrels],
    *,
    committed: bool = False,
) -> tuple[HumanSample, Qrels] | None:
    """The checked sampling record and the LLM qrels (read by `read_qrels`) when `--llm-qrels`
    is given, else None. The record's frame must be the committed one (`--frame`): always when
    `committed` (a gate decides on it), else when the file exists."""
    if args.llm_qrels is None:
        for option in ("human_sample", "frame"):
            if getattr(args, option) is not None:
                args.refuse(f"argument --{option.replace('_', '-')}: only with --llm-qrels")
        return None
    if args.format == "csv":
        args.refuse("argument --llm-qrels: PPI estimates print with --format table or json")
    from rageval_pipeline.core.statistics.frames import check_frame, frame_path, load_frame
    from rageval_pipeline.core.statistics.sampling import check_sample, load_sample, sample_path

    sample = load_sample(args.human_sample or sample_path(args.qrels))
    frame = Path(args.frame) if args.frame else frame_path(args.qrels)
    if committed or args.frame or frame.is_file():
        check_frame(sample, load_frame(frame), where=args.human_sample or sample_path(args.qrels))
    llm = read_qrels(args.llm_qrels)
    _check_scale(llm[0], human[0], args.llm_qrels)
    check_sample(
        sample,
        set(human[0]["query_id"]),
        set(llm[0]["query_id"]),
        where=args.qrels,
        llm_where=args.llm_qrels,
    )
    return sample, llm


def _check_scale(llm: pd.DataFrame, human: pd.DataFrame, where: str) -> None:
    """LLM grades lie on the human judgments' scale: 0 up to their highest grade (at least 3,
    the scale `rageval label` writes). Grades 7 and -3 moved an estimate from 0.8018 to 0.8105
    without a word."""
    from rageval_pipeline.core.errors import InputError

    top = max(3, int(human["relevance"].max()) if len(human) else 0)
    outside = llm[~llm["relevance"].between(0, top)]
    if len(outside):
        row = outside.iloc[0]
        raise InputError(
            where,
            f"grade {row.relevance} of query {row.query_id!r}, document {row.doc_id!r} is "
            f"outside the human judgments' scale 0-{top}: fix or drop the line",
            field="relevance",
        )


def as_json(estimate: PpiEstimate) -> dict:
    return estimate.model_dump(include=set(FIELDS))


def line(label: str, estimate: PpiEstimate) -> str:
    """One table line: the estimate, its 95% interval, the sizes and the MDE gained."""
    return (
        f"{label:<12}\tppi\t{estimate.estimate:+.4f} [{estimate.ci_low:+.4f}, "
        f"{estimate.ci_high:+.4f}]\tn_human {estimate.n_human}, n_llm {estimate.n_llm}, "
        f"effective n {estimate.effective_n:.0f}, MDE {estimate.mde:.4f} "
        f"(humans alone {estimate.mde_human:.4f})"
    )


def compared(
    human: tuple[pd.DataFrame, pd.DataFrame],
    llm: tuple[pd.DataFrame, pd.DataFrame],
    sample: HumanSample,
    measures: list[str],
    *,
    where: str,
) -> dict[str, dict[str, PpiEstimate]]:
    """Per measure, the PPI++ means of A and B and their paired delta B - A (`where`: the human
    qrels, named when a drawn query has no human value)."""
    from rageval_pipeline.core.statistics.ppi import nested, ppi_deltas, ppi_means

    human_values, llm_values = (tuple(nested(t) for t in pair) for pair in (human, llm))
    a, b = (
        ppi_means(human_values[i], llm_values[i], sample, measures, where=where) for i in (0, 1)
    )
    delta = ppi_deltas(human_values, llm_values, sample, measures, where=where)
    return {m: {"a": a[m], "b": b[m], "delta": delta[m]} for m in measures}
