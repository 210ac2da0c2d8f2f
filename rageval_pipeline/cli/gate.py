"""`rageval gate`: the release gate on run files, for a CI that has runs but no Dagster.

The baseline's run and the new run are scored against the qrels by `rageval eval`'s code
(`scoring`), each made a `RunSummary` as the gate reads a stored run back (`history.summaries`),
the baseline's recorded from its summary, and decided by `core.gate.decide` under the policy:
the same decision, verdict and report as the `gate` asset. Exit 0 when the verdict passes, 1
when it is blocked, 2 on bad input (one line naming file, line and field).

With `--llm-qrels` the qrels are the human judgments of a recorded random sample of the
population (`--human-sample`, docs/statistics.md) and the dataset's `statistics.rule` is `ppi`.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rageval_pipeline.cli import add_policy_option, policy_of, ppi_scores, scoring
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.measures.defaults import EVAL_MEASURES

if TYPE_CHECKING:
    from rageval_pipeline.core.gate import GatePolicy, RunSummary

FORMATS = ("md", "json")
# Beside `rageval eval`'s measures: Judged@10, which the gate's unjudged check compares.
GATE_MEASURES = (*EVAL_MEASURES, "Judged@10")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gate",
        help="the release gate on two run files: exit 0 pass, 1 blocked, 2 bad input",
        description="Score the baseline's run and the new run against the qrels, decide with "
        "the gate policy (the pipeline's gate, docs/gate.md) and print the verdict's report.",
    )
    parser.add_argument("qrels", metavar="QRELS", help="TREC or BEIR qrels")
    parser.add_argument("baseline", metavar="BASELINE", help="the baseline's run")
    parser.add_argument("run", metavar="RUN", help="the run under judgement")
    add_policy_option(parser, "the gate policy")
    parser.add_argument(
        "--baseline-policy",
        metavar="FILE",
        help="the gate policy the baseline was judged under (e.g. the file on the target "
        "branch): a looser --policy blocks with a `policy` check naming each loosened field",
    )
    parser.add_argument(
        "--dataset", metavar="NAME", help="whose policy rules apply (default: the qrels' stem)"
    )
    parser.add_argument(
        "--system", metavar="NAME", help="the system's name in the report (default: RUN's stem)"
    )
    parser.add_argument(
        "-m",
        "--measure",
        action="append",
        dest="measures",
        metavar="MEASURE",
        help=f"measures scored (repeatable; default {' '.join(GATE_MEASURES)}, and those the "
        "policy compares)",
    )
    parser.add_argument(
        "--suite",
        metavar="SUITE",
        help="the golden suite (file or folder) whose evidence spans the span measures a "
        "policy compares need (EvidenceRecall@512t, ...)",
    )
    ppi_scores.add_options(parser)
    parser.add_argument(
        "--format", choices=FORMATS, default="md", help="output format (default: %(default)s)"
    )
    parser.add_argument(
        "-o",
        "--output",
        dest="reports",
        metavar="DIR",
        help="folder to write gate.json, report.json, gate.md and gate.html to, besides printing",
    )
    parser.set_defaults(func=run_gate, refuse=parser.error)


def _policy(args: argparse.Namespace, dataset: str, given: Path | None) -> GatePolicy:
    """The policy file's rules (`policy_of`: `given`, else the data folder's, else the
    defaults), with `statistics.rule: ppi` for the dataset under `--llm-qrels`: LLM labels
    given for a gate are there to decide it."""
    policy = policy_of(given)
    if args.llm_qrels is None:
        return policy
    rules = policy.rules_for(dataset)
    statistics = rules.statistics.model_copy(update={"rule": "ppi"})
    ppi = rules.model_copy(update={"statistics": statistics})
    return policy.model_copy(update={"datasets": {**policy.datasets, dataset: ppi}})


def _stamp(path: str) -> str:
    """A run file's modification time (UTC, ISO-8601): the same files decide the same report."""
    return datetime.fromtimestamp(Path(path).stat().st_mtime, UTC).isoformat(timespec="seconds")


def run_gate(args: argparse.Namespace) -> int:
    from rageval_pipeline.core import report
    from rageval_pipeline.core.gate import baseline_from_summary, decide
    from rageval_pipeline.core.history.summaries import run_summary
    from rageval_pipeline.core.measures.aggregate import mean_table
    from rageval_pipeline.core.statistics.compare import mixed_levels, scored_level
    from rageval_pipeline.core.storage.reuse import file_digest

    reports = None if args.reports is None else Path(args.reports)
    if reports is not None and reports.exists() and not reports.is_dir():
        raise InputError("--output", f"{reports} is a file, not a folder")  # before scoring
    dataset = args.dataset or Path(args.qrels).stem
    system = args.system or Path(args.run).stem
    policy = _policy(args, dataset, args.policy)
    # The baseline's policy: without --baseline-policy, the one judging the run, so nothing
    # reads as loosened.
    recorded = _policy(args, dataset, Path(args.baseline_policy)) if args.baseline_policy else None
    rules = policy.rules_for(dataset)
    # Every measure the policy may decide or check on: its compare list, the primary measure
    # it names (spike.measure) and the unjudged check's.
    named = [*(rules.compare or ()), rules.spike.measure, rules.unjudged.measure]
    wanted = args.measures or [*GATE_MEASURES, *(str(m) for m in named if m is not None)]
    args.measures = list(dict.fromkeys(wanted))
    measures = scoring.parse_measures(args)
    files = [args.baseline, args.run]
    qrels = scoring.read_judgments(args.qrels, files, document_level=False)
    population = ppi_scores.population(
        args,
        qrels,
        lambda path: scoring.read_judgments(path, files, document_level=False),
        committed=True,
    )
    summaries: list[RunSummary] = []
    for path in files:
        ranked = scoring.read_run_file(path, document_level=False)
        per_query = scoring.score_run(qrels, args.qrels, ranked, path, measures, args.suite)
        by_llm = None
        if population is not None:
            judged = population[1]
            by_llm = scoring.score_run(judged, args.llm_qrels, ranked, path, measures, args.suite)
        digest = file_digest(Path(path))[:16]
        summaries.append(
            run_summary(
                per_query,
                mean_table(per_query),
                sample_per_query=None if population is None else per_query,
                llm_per_query=by_llm,
                dataset=dataset,
                split="test",
                system=system,
                fingerprint=digest,
                run_id=digest,
                created_at=_stamp(path),
                n_queries=per_query["query_id"].nunique(),
                level=scored_level(ranked.doc_id),
                human_sample=None if population is None else population[0],
            )
        )
    base, run = summaries
    if why := mixed_levels(base.level, run.level):
        raise InputError(args.run, why)
    baseline = baseline_from_summary(
        base,
        note=f"the run file {args.baseline}",
        rules=None if recorded is None else recorded.rules_for(dataset),
    )
    baselines = {(dataset, system): baseline}
    verdict = decide([run], baselines, policy)
    full = report.build_report(verdict, [run], baselines)
    if args.reports is not None:
        report.write_reports(full, Path(args.reports), drawn=report.draw(full))
    print(report.to_json(verdict) if args.format == "json" else report.to_markdown(full), end="")
    print(f"gate: {verdict.summary}", file=sys.stderr)
    return 0 if verdict.passed else 1
