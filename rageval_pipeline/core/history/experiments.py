"""The experiments log: every gated evaluation, with what changed.

Each judged run becomes one `Experiment`: an id (`exp-001`, in recording order), the date, a
description (the Dagster run tag `rageval/description`, `scripts/evaluate --description`, else
the configuration changes themselves), the configuration changes against the baseline as
dotted keys, the run's mean measures and the verdict, ACCEPTED when none of its blocking gate
checks failed, else REJECTED, with the reason. Kept in the warehouse table `experiments` and
exported as `experiments.json` (docs/tuning.md gives its shape).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
from pydantic import BaseModel, ConfigDict

from rageval_pipeline.core.gate import Baseline, RunSummary, Verdict
from rageval_pipeline.core.gate.changes import config_changes
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.storage.base import BaseWarehouse
from rageval_pipeline.core.storage.files import write_text

DESCRIPTION_TAG = "rageval/description"


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    date: str  # YYYY-MM-DD (UTC)
    created_at: datetime
    dataset: str
    split: str
    system: str
    run_id: str
    fingerprint: str
    baseline_fingerprint: str | None
    description: str
    config_changes: dict[str, list[Any]]  # dotted key -> [before, after]
    results: dict[str, float]  # measure -> mean
    verdict: Literal["ACCEPTED", "REJECTED"]
    reason: str

    def json_entry(self) -> dict:
        """The entry of `experiments.json`: `config_changes` maps each key to its new value,
        `verdict` is `ACCEPTED (reason)`; the rest (dataset, system, run, previous values)
        follows it."""
        return dict(
            id=self.id,
            date=self.date,
            description=self.description,
            config_changes={k: after for k, (_, after) in self.config_changes.items()},
            results=self.results,
            verdict=f"{self.verdict} ({self.reason})",
            dataset=self.dataset,
            split=self.split,
            system=self.system,
            run_id=self.run_id,
            config_before={k: before for k, (before, _) in self.config_changes.items()},
        )


def _reason(verdict: Verdict, key: tuple[str, str, str], baseline: Baseline | None) -> str:
    failures = [c for c in verdict.failures if (c.dataset, c.split, c.system) == key]
    if failures:
        labels = sorted({c.category for c in failures if c.category})
        head = f"{', '.join(labels)}: " if labels else ""
        more = f" (+{len(failures) - 2} more)" if len(failures) > 2 else ""
        return head + "; ".join(c.message for c in failures[:2]) + more
    if baseline is None:
        return "no baseline: absolute limits passed"
    better = [
        c.measure
        for c in verdict.checks
        if (c.dataset, c.split, c.system) == key
        and c.kind == "baseline"
        and c.delta is not None
        and c.delta > 0
    ]
    return f"all checks passed; improved: {', '.join(better)}" if better else "all checks passed"


def experiments_from(
    verdict: Verdict,
    summaries: list[RunSummary],
    baselines: dict[tuple[str, str], Baseline],
    *,
    description: str | None,
    created_at: datetime,
    first_number: int,
) -> list[Experiment]:
    """One experiment per judged run, numbered from `first_number`."""
    out = []
    for number, s in enumerate(summaries, start=first_number):
        baseline = baselines.get((s.dataset, s.system))
        if baseline is not None and baseline.split != s.split:
            baseline = None
        changes = config_changes(baseline.config, s.config) if baseline and baseline.config else {}
        key = (s.dataset, s.split, s.system)
        failed = any((c.dataset, c.split, c.system) == key for c in verdict.failures)
        shown = "; ".join(f"{k}: {a} -> {b}" for k, (a, b) in changes.items())
        out.append(
            Experiment(
                id=f"exp-{number:03d}",
                date=f"{created_at:%Y-%m-%d}",
                created_at=created_at,
                dataset=s.dataset,
                split=s.split,
                system=s.system,
                run_id=s.run_id,
                fingerprint=s.fingerprint,
                baseline_fingerprint=baseline.fingerprint if baseline else None,
                description=description or shown or "no configuration change",
                config_changes={k: [a, b] for k, (a, b) in changes.items()},
                results={m: round_metric(v) for m, v in sorted(s.measures.items())},
                verdict="REJECTED" if failed else "ACCEPTED",
                reason=_reason(verdict, key, baseline),
            )
        )
    return out


def record(
    warehouse: BaseWarehouse,
    verdict: Verdict,
    summaries: list[RunSummary],
    baselines: dict[tuple[str, str], Baseline],
    *,
    description: str | None,
    created_at: datetime,
) -> list[Experiment]:
    """Number and insert the experiments of one gate at once (the lake numbers them again
    in commit order when read: core.storage.lake)."""
    return _insert(
        warehouse,
        lambda first: experiments_from(
            verdict,
            summaries,
            baselines,
            description=description,
            created_at=created_at,
            first_number=first,
        ),
    )


def _insert(
    warehouse: BaseWarehouse, numbered: Callable[[int], list[Experiment]]
) -> list[Experiment]:
    """Insert the experiments `numbered` makes from the next free number, counted and inserted
    under one turn of DuckDB's lock."""
    with warehouse.transaction():
        (count,) = warehouse.query("SELECT count(*) AS n FROM experiments")["n"]
        rows = numbered(int(count) + 1)
        frame = pd.DataFrame([e.model_dump() for e in rows], columns=list(Experiment.model_fields))
        for column in ("config_changes", "results"):
            frame[column] = [json.dumps(v, sort_keys=True) for v in frame[column]]
        warehouse.append("experiments", frame)
    return rows


def record_accepted_worse(
    warehouse: BaseWarehouse,
    baselines: list[Baseline],
    refusals: list[str],
    *,
    created_at: datetime,
) -> list[Experiment]:
    """One experiment per baseline stored with `--accept-worse`: its reason as the
    description, what would have refused it as the reason, so the log lists every accepted
    loss beside the evaluations."""

    def numbered(first: int) -> list[Experiment]:
        return [
            Experiment(
                id=f"exp-{number:03d}",
                date=f"{created_at:%Y-%m-%d}",
                created_at=created_at,
                dataset=b.dataset,
                split=b.split,
                system=b.system,
                run_id=b.source_run_id,
                fingerprint=b.fingerprint,
                baseline_fingerprint=b.replaced.fingerprint if b.replaced else None,
                description=f"baseline accepted worse: {b.accepted_worse}",
                config_changes={},
                results={m: round_metric(v) for m, v in sorted(b.measures.items())},
                verdict="ACCEPTED",
                reason=f"accepted worse ({b.accepted_worse}): {why}",
            )
            for number, (b, why) in enumerate(zip(baselines, refusals, strict=True), first)
        ]

    return _insert(warehouse, numbered)


def load(
    warehouse: BaseWarehouse, *, dataset: str | None = None, system: str | None = None
) -> list[Experiment]:
    """The log in recording order, optionally narrowed to one dataset and/or system."""
    try:
        rows = warehouse.query(
            "SELECT * FROM experiments WHERE (? IS NULL OR dataset = ?) "
            "AND (? IS NULL OR system = ?) ORDER BY id",
            [dataset, dataset, system, system],
        )
    except duckdb.CatalogException:  # no gate has run on this warehouse yet
        return []
    return [
        Experiment(
            **(
                row
                | dict(
                    config_changes=json.loads(row["config_changes"]),
                    results=json.loads(row["results"]),
                    baseline_fingerprint=None
                    if pd.isna(row["baseline_fingerprint"])
                    else row["baseline_fingerprint"],
                )
            )
        )
        for row in rows.to_dict("records")
    ]


def export(experiments: list[Experiment], path: Path) -> None:
    """`experiments.json`: {"experiments": [...]}."""
    data = {"experiments": [e.json_entry() for e in experiments]}
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
