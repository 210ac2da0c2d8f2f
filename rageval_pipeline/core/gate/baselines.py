"""Baselines on disk: where they live, how they are written and read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate.models import Baseline, RunSummary
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
        return round(value, 6) + 0.0  # + 0.0 turns -0.0 into 0.0
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


_M = TypeVar("_M", bound=BaseModel)


def _field_path(loc: tuple[Any, ...]) -> str | None:
    return ".".join(str(part) for part in loc) or None


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest key (or item) of `loc` present in a YAML or JSON document."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == str(part)), None)
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            pair = (node.value[part], node.value[part])
        else:
            pair = None
        if pair is None:
            break
        line = pair[0].start_mark.line + 1
        node = pair[1]
    return line


def _validate(model: type[_M], data: Any, path: Path, text: str) -> _M:
    if data is None:
        raise InputError(path, "file is empty")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        more = exc.error_count() - 1
        problem = error["msg"] + (f" (and {more} more problem(s))" if more else "")
        raise InputError(path, problem, line=_line_of(text, loc), field=_field_path(loc)) from None


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def load_baseline(path: Path) -> Baseline:
    """Read and validate one baseline file; InputError names the file, line and field."""
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    return _validate(Baseline, data, Path(path), text)


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
