"""Baselines on disk: where they live, how they are written and read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rageval_pipeline.core.config import load_model
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate.models import Baseline, RunSummary
from rageval_pipeline.core.numbers import round_metric
from rageval_pipeline.core.storage import write_text


def baseline_from_summary(
    summary: RunSummary, note: str | None = None, *, recorded_at: str | None = None
) -> Baseline:
    """Turn a reviewed run into a baseline.

    `recorded_at` defaults to the run's own timestamp so that recording the same run twice
    writes the same file.
    """
    fields = summary.model_dump(exclude={"run_id", "created_at"})
    return Baseline(
        **fields,
        recorded_at=recorded_at or summary.created_at,
        source_run_id=summary.run_id,
        note=note,
    )


def _round_floats(value: Any) -> Any:
    if isinstance(value, float):
        return round_metric(value)
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round_floats(v) for v in value]
    return value


def write_baseline(baseline: Baseline, path: Path) -> None:
    """Write with sorted keys, 2-space indent and 6-decimal floats, so diffs stay small."""
    data = _round_floats(baseline.model_dump(mode="json"))
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _safe_component(root: Path, value: str, field: str) -> str:
    if not value or value in {".", ".."} or "/" in value or "\\" in value:
        raise InputError(root, f"{value!r} cannot be used as a file name", field=field)
    return value


def baseline_path(root: Path, dataset: str, system: str) -> Path:
    """Where the baseline of (dataset, system) lives: root/<dataset>/<system>.json."""
    root = Path(root)
    dataset = _safe_component(root, dataset, "dataset")
    return root / dataset / f"{_safe_component(root, system, 'system')}.json"


def load_baseline(path: Path) -> Baseline:
    """Read and validate one baseline file; InputError names the file, line and field."""
    return load_model(Path(path), Baseline)


def load_baselines(root: Path) -> dict[tuple[str, str], Baseline]:
    """Every baseline under root, keyed by (dataset, system); a missing root means none."""
    root = Path(root)
    out: dict[tuple[str, str], Baseline] = {}
    for path in sorted(root.glob("*/*.json")):
        baseline = load_baseline(path)
        if baseline_path(root, baseline.dataset, baseline.system) != path:
            raise InputError(
                path,
                f"holds the baseline of {baseline.dataset}/{baseline.system}, which belongs in "
                f"{baseline_path(root, baseline.dataset, baseline.system)}",
                field="dataset" if path.parent.name != baseline.dataset else "system",
            )
        out[(baseline.dataset, baseline.system)] = baseline
    return out
