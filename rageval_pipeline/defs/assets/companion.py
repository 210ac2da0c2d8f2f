"""A suite's companion LLM-labelled query set, as `evaluate_dataset` reads it for PPI.

A suite carries one when its folder holds the committed companion set of the `label_dataset`
job (docs/synthetic.md): `<suite>.synthetic.jsonl`, its `sample.json` (the random human sample,
its seed committed by the frame) and the sample's graded sheet `<suite>.synthetic.sheet.jsonl`;
and when that job has labelled it and calibrated its judge (`$RAGEVAL_STORAGE/labels/<suite>/`
`llm.qrels` and `calibration.json`). Every system then also runs on the companion queries, and
its metrics step stores, beside the suite's human-only numbers, the PPI++ estimate over the
companion population: what the gate decides with under `statistics.rule: ppi`. Without all
five files there is no companion set; with a judge below the policy's calibration floor, its
labels are not used (the step says so, and the gate's `ppi` rule then refuses the run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from rageval_pipeline.core.generation import labelling, synthetic
from rageval_pipeline.core.generation.calibration import Calibration
from rageval_pipeline.core.io.chunk_ids import is_chunk_id
from rageval_pipeline.core.io.config import load_model
from rageval_pipeline.core.io.formats import read_qrels
from rageval_pipeline.core.io.tables import QUERIES
from rageval_pipeline.core.results.ppi_tables import population_tables
from rageval_pipeline.core.statistics.frames import FRAME_FILE, check_frame, load_frame
from rageval_pipeline.core.statistics.sampling import HumanSample, load_sample
from rageval_pipeline.core.storage.reuse import content_key, file_digest
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.defs.resources import Settings


class Companion(NamedTuple):
    queries: pd.DataFrame  # the QUERIES table of the companion set
    sample: HumanSample
    human: pd.DataFrame  # qrels of the drawn queries: the graded sheet
    llm: pd.DataFrame  # qrels of every query: the LLM's labels
    sheet: str  # the graded sheet's path, named when a drawn query has no human value
    refusal: str | None  # why the judge's labels may not be used for gating (calibration)
    key: str  # digest of the four files: a run or metrics step that read them is keyed by it


def _qrels(grades: dict[tuple[str, str], int], split: str) -> pd.DataFrame:
    """QRELS rows of (query, target) -> grade; a target of the form doc:chunk:n is a chunk."""
    rows = [(split, q, t, g) for (q, t), g in sorted(grades.items())]
    frame = pd.DataFrame(rows, columns=["split", "query_id", "doc_id", "relevance"])
    chunk = is_chunk_id(frame["doc_id"])
    return frame.assign(level=chunk.map({True: "chunk", False: "document"}))


def companion(settings: Settings, dataset: str) -> Companion | None:
    """The dataset's companion set with its sample and labels, or None when it has none."""
    folder = settings.dataset_folder(dataset)
    if loaders.suite_file(folder) is None:
        return None
    suite = load_suite(folder)
    queries_path = synthetic.companion_path(folder, suite)
    sample_path = folder / labelling.SAMPLE_FILE
    sheet = synthetic.sheet_path(folder, suite)
    llm_path = settings.storage / "labels" / dataset / "llm.qrels"
    judged = llm_path.with_name("calibration.json")
    files = (queries_path, sample_path, sheet, llm_path, judged)
    if not all(path.is_file() for path in files):
        return None
    rows = [(q.id, q.query) for q in synthetic.read_companion(queries_path)]
    queries = pd.DataFrame(rows, columns=["query_id", "text"])
    queries = queries.reindex(columns=QUERIES.names).astype(object)
    sample = load_sample(sample_path)
    committed = folder / FRAME_FILE
    check_frame(sample, load_frame(committed), where=sample_path)
    llm = read_qrels(llm_path, split=settings.split)
    llm = llm[llm["query_id"].isin(sample.frame)]  # (it labels the suite's own queries too)
    llm = llm.assign(level=is_chunk_id(llm["doc_id"]).map({True: "chunk", False: "document"}))
    return Companion(
        queries=queries.where(queries.notna(), None),
        sample=sample,
        human=_qrels(labelling.sheet_grades([sheet]), settings.split),
        llm=llm,
        sheet=str(sheet),
        refusal=None if (c := load_model(judged, Calibration)).usable else c.refusal,
        key=content_key([file_digest(path) for path in (*files, committed)]),
    )


@dataclass(frozen=True)
class SplitRun:
    """A run's rows of the suite's queries, and of the companion set's when there is one."""

    suite: pd.DataFrame
    extra: Companion | None
    rows: pd.DataFrame | None

    @property
    def sample_json(self) -> str | None:
        return None if self.extra is None else self.extra.sample.model_dump_json()

    def ppi(self, chunk_level: bool, warn: Callable[[str], None]) -> dict | None:
        """The PPI rows over the companion population (`population_tables`); None without a
        companion set, or when its judge is below the calibration floor (said with `warn`)."""
        if self.extra is None or self.rows is None:
            return None
        if self.extra.refusal is not None:
            warn(f"no PPI over the companion set: {self.extra.refusal}")
            return None
        e = self.extra
        return population_tables(
            self.rows, e.human, e.llm, e.queries, e.sample, chunk_level=chunk_level, where=e.sheet
        )


def split_run(run: pd.DataFrame, extra: Companion | None) -> SplitRun:
    """The suite's rows are measured as the suite (its human-only numbers stay the suite's);
    the companion's apart, for PPI."""
    if extra is None:
        return SplitRun(run, None, None)
    inside = run["query_id"].isin(extra.queries["query_id"])
    return SplitRun(run[~inside], extra, run[inside])
