"""`synth` and `label` as one function each, shared by the CLI and the Dagster assets.

Both pool the suite's documents with the chosen systems run in process (`core/curation/pool.py`):
`synthesize` to filter candidates by round trip and to write the human sample's judging sheet,
`label` to find the pairs to grade. Files (docs/synthetic.md):

- `<suite>.synthetic.jsonl`, `frame.json` (the committed frame: core/statistics/frames.py),
  `sample.json`, `<suite>.synthetic.sheet.jsonl` (synthesize);
- `labels.jsonl`, `llm.qrels` (TREC, for `--llm-qrels`), `checks.jsonl` and
  `calibration.json` (label).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from pydantic import BaseModel

from rageval_pipeline.core.curation import pool, sheets
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import calibration, judge_labels, synthetic
from rageval_pipeline.core.generation.config import GenerationError
from rageval_pipeline.core.generation.llm import LLM
from rageval_pipeline.core.statistics.frames import FRAME_FILE, commit_frame
from rageval_pipeline.core.statistics.sampling import write_sample
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.suites.chunking import StoredChunks
from rageval_pipeline.core.suites.consistency import target_text
from rageval_pipeline.core.suites.golden import Suite
from rageval_pipeline.core.systems import SystemConfig

SAMPLE_FILE = "sample.json"


class Pooling(BaseModel):
    """Which systems pool the suite, and where their inputs live."""

    model_config = {"arbitrary_types_allowed": True}

    systems: dict[str, SystemConfig]
    embeddings_dir: Path
    base_dir: Path  # the systems file's folder
    # The suite's documents chunked by a chunking, as the caller has them stored (the
    # pipeline's `<system>/chunks`); None: chunked once in this process.
    stored_chunks: StoredChunks | None = None

    def ranks(self, suite: Suite, queries: list[tuple[str, str]], depth: int) -> pd.DataFrame:
        """Best rank of each pooled target per (query, system) within `depth`."""
        runs = pool.run_systems(
            suite,
            self.systems,
            max(depth, pool.RUN_DEPTH),
            embeddings_dir=self.embeddings_dir,
            base_dir=self.base_dir,
            queries=synthetic.queries_table(queries),
            stored_chunks=self.stored_chunks,
        )
        return pool.target_ranks(suite, self.systems, runs, depth)


class SynthOutcome(BaseModel):
    report: synthetic.SynthReport
    companion: Path
    sample: Path | None
    sheet: Path | None


def synthesize(
    suite: Suite,
    llm: LLM,
    pooling: Pooling,
    folder: Path,
    *,
    n: int,
    seed: int,
    human_sample: int,
    depth: int,
) -> SynthOutcome | None:
    """Write the companion set, the human sample and its sheet into `folder`; None on a dry
    run (the LLM's usage says what it would spend). Passages are drawn from the chunks
    `pooling` has (`synthetic.units`)."""
    candidates, unparseable = synthetic.write_queries(llm, suite, n, seed, pooling.stored_chunks)
    if llm.dry_run:
        return None
    unique = synthetic.without_duplicates(suite, candidates)
    ranks = pooling.ranks(
        suite, [(q, text) for q, text, _, _ in unique], synthetic.ROUND_TRIP_DEPTH
    )
    kept = synthetic.round_trip(unique, ranks, llm)
    report = synthetic.SynthReport(
        drawn=n,
        unparseable=unparseable,
        duplicates=len(candidates) - len(unique),
        not_found_again=len(unique) - len(kept),
        kept=len(kept),
    )
    # Drawn before anything is written: a sample the kept queries cannot fill leaves no file.
    try:
        drawn = synthetic.human_sample(kept, human_sample) if human_sample else None
    except GenerationError as error:  # say why so few were kept
        raise GenerationError(f"{report.describe()}; {error}") from None
    companion = synthetic.companion_path(folder, suite)
    synthetic.write_companion(companion, kept)
    # The population, fixed before anything is judged: the human sample's seed is its digest.
    commit_frame([q.id for q in kept], folder / FRAME_FILE)
    sample_path = sheet = None
    if drawn is not None:
        sample_path = folder / SAMPLE_FILE
        write_sample(drawn, sample_path)
        chosen = set(drawn.drawn())
        text_of = {q.id: q.query for q in kept if q.id in chosen}
        sheet = synthetic.sheet_path(folder, suite)
        sheets.write_sheet(pool.pool_entries(suite, ranks[ranks["rank"] <= depth], text_of), sheet)
    return SynthOutcome(report=report, companion=companion, sample=sample_path, sheet=sheet)


def sheet_grades(paths: list[Path]) -> dict[calibration.Key, int]:
    """The graded rows of judging sheets (e.g. the synthetic sample's, once judged), read as
    `pool merge` reads them (`sheets.read_rows`, `sheets.grade_cell`): call it before any
    judge call or file, so a bad sheet costs nothing."""
    grades: dict[calibration.Key, int] = {}
    for sheet in paths:
        for line, row in sheets.read_rows(sheet):
            grade = sheets.grade_cell(row.get("grade"), sheet, line)
            for field in ("query_id", "target_id"):
                if not isinstance(row.get(field), str) or not row[field]:
                    raise InputError(sheet, "must be a non-empty text", line=line, field=field)
            if grade is not None:
                grades[row["query_id"], row["target_id"]] = grade
    return grades


def human_grades(suite: Suite, sheets: list[Path]) -> dict[calibration.Key, int]:
    """The suite's judgments and the graded rows of judging sheets."""
    return {(q.id, t): g for q in suite.queries for t, g in q.qrels} | sheet_grades(sheets)


def trec(grades: Mapping[calibration.Key, int]) -> str:
    """TREC qrels lines (`query 0 target grade`), sorted."""
    return "".join(f"{q} 0 {t} {g}\n" for (q, t), g in sorted(grades.items()))


def pooled(
    suite: Suite,
    companion: list[synthetic.SyntheticQuery],
    pooling: Pooling,
    depth: int,
) -> tuple[list[judge_labels.Pair], pd.DataFrame]:
    """The pairs to grade (the pooled top `depth` of the suite's and the companion queries)
    and the pool's ranks."""
    ranks = pooled_ranks(suite, companion, pooling, depth)
    return pooled_pairs(suite, companion, ranks, depth), ranks


def _queries(
    suite: Suite, companion: list[synthetic.SyntheticQuery]
) -> dict[str, tuple[str, bool]]:
    """Query id -> (text, synthetic) of the suite's queries and the companion's."""
    queries = {q.id: (q.query, False) for q in suite.queries if q.query.strip()}
    return queries | {q.id: (q.query, True) for q in companion}


def pooled_ranks(
    suite: Suite, companion: list[synthetic.SyntheticQuery], pooling: Pooling, depth: int
) -> pd.DataFrame:
    """The pool's ranks (query_id, target_id, system, rank) of the suite's and the companion
    queries: every pooled system's retrieval, the costly part, run once."""
    queries = _queries(suite, companion)
    return pooling.ranks(suite, [(q, text) for q, (text, _) in queries.items()], depth)


def pooled_pairs(
    suite: Suite, companion: list[synthetic.SyntheticQuery], ranks: pd.DataFrame, depth: int
) -> list[judge_labels.Pair]:
    """The (query, passage) pairs to grade: the pooled top `depth` of `ranks`, with texts."""
    pooled = set(zip(ranks["query_id"], ranks["target_id"], strict=True))
    passages = {t: target_text(suite, t) for _, t in sorted(pooled)}
    titles = {d.id: d.title for d in suite.documents}
    return judge_labels.pooled_pairs(ranks, _queries(suite, companion), passages, titles, depth)


def write_labels(folder: Path, labels: list[judge_labels.Label]) -> Path:
    """`labels.jsonl` and the TREC `llm.qrels` (parsed labels only) into `folder`."""
    write_text(folder / "labels.jsonl", sheets.jsonl(labels))
    qrels = folder / "llm.qrels"
    write_text(qrels, judge_labels.trec_qrels(labels))
    return qrels


def calibrate(
    llm: LLM,
    pairs: list[judge_labels.Pair],
    labels: list[judge_labels.Label],
    ranks: pd.DataFrame,
    human: Mapping[calibration.Key, int],
    *,
    min_kappa: float,
    check_sample: int = 50,
    seed: int = 0,
    second: LLM | None = None,
    folder: Path | None = None,
) -> calibration.Calibration | None:
    """The judge's calibration on the human-graded pairs, with the bias checks on a seeded
    sample of them (more calls); written to `folder` (`checks.jsonl`, `calibration.json`).
    None on a dry run."""
    judged = [(p.query_id, p.target_id) for p in pairs if (p.query_id, p.target_id) in human]
    probe = set(calibration.sample_keys(judged, check_sample, seed))
    probed = [p for p in pairs if (p.query_id, p.target_id) in probe]
    variants = {v: judge_labels.grade(llm, probed, v) for v in ("title", "truncated")}
    others = judge_labels.grade(second, probed) if second is not None else []
    if llm.dry_run:
        return None
    checks = [calibration.check(f"presentation:{v}", labels, rows) for v, rows in variants.items()]
    if second is not None:
        checks.append(calibration.check("second_judge", labels, others))
    result = calibration.calibrate(labels, human, ranks, min_kappa, checks)
    if folder is not None:
        rows = [*variants["title"], *variants["truncated"], *others]
        write_text(folder / "checks.jsonl", sheets.jsonl(rows))
        write_text(folder / "calibration.json", json.dumps(result.model_dump(), indent=1) + "\n")
    return result


def describe(c: calibration.Calibration) -> str:
    """The calibration as the lines `rageval label` prints."""

    def number(value: float | None, missing: str = "n/a") -> str:
        return missing if value is None else f"{value:.3f}"

    lines = [
        f"calibration of {c.judge} on {c.pairs} human-graded pair(s), {c.unparseable} "
        f"unparseable: weighted kappa (quadratic) {number(c.kappa_quadratic, 'undefined')} "
        f"(floor {c.min_kappa:g}); Kendall's tau of {len(c.systems)} system ranking(s) "
        f"{number(c.kendall_tau)}",
        "confusion (rows: human grade, columns: LLM grade, then unparseable):",
        "        0     1     2     3     ?",
    ]
    lines += [
        f"  {g}" + "".join(f"{n:6d}" for n in [*row, c.unparseable_by_grade[g]])
        for g, row in enumerate(c.confusion)
    ]
    lines += [
        f"check {k.name} ({k.judge}): {k.pairs} pair(s), same grade {number(k.same)}, "
        f"kappa {number(k.kappa_quadratic)}, {k.unparseable} unparseable"
        for k in c.checks
    ]
    return "\n".join(lines)
