"""One run under judgement, before any policy: its summary, what was measured beside it, and
how its checks are built. The policy's rule kinds (`gate.rules`) judge this; `Evaluation` adds
the rules of the run's dataset for the checks against the baseline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rageval_pipeline.core.gate.models import Check, RunSummary
from rageval_pipeline.core.gate.taxonomy import Category


def deltas(value: float, reference: float) -> tuple[float, float | None]:
    delta = value - reference
    return delta, (delta / reference if reference else None)


def _delta_text(delta: float, relative: float | None, unit: str = "") -> str:
    digits = ".1f" if unit else ".4f"
    text = f"delta {delta:+{digits}}{unit}"
    return text + (f", {relative:+.1%}" if relative is not None else "")


@dataclass(frozen=True)
class Run:
    """One run summary, with the integrity rates of its chunks when they were measured
    (rate name -> share, e.g. metadata_completeness; None for runs without chunks)."""

    summary: RunSummary
    integrity: Mapping[str, float] | None = field(default=None, kw_only=True)

    @property
    def label(self) -> str:
        return f"{self.summary.dataset}/{self.summary.system}"

    def update_command(self, *options: str) -> str:
        """`rageval baseline update` of this run's dataset and system with `options`: the one
        spelling of the command every check's advice names."""
        s = self.summary
        return " ".join(
            ("rageval baseline update", f"--dataset {s.dataset}", f"--system {s.system}", *options)
        )

    def check(self, **fields: Any) -> Check:
        """A check of this run; a measure's check carries the interval of the run's mean."""
        s = self.summary
        interval = s.intervals.get(fields.get("measure") or "")
        if interval is not None and "ci_low" not in fields:
            fields |= {"ci_low": interval[0], "ci_high": interval[1]}
        return Check(dataset=s.dataset, split=s.split, system=s.system, **fields)

    def compared(
        self,
        *,
        value: float,
        reference: float,
        passed: bool,
        category: Category | None,
        message: str,
        unit: str = "",
        **fields: Any,
    ) -> Check:
        """A check of `value` against `reference`: deltas computed, the failure's taxonomy
        label kept only when it failed, and the delta appended to the message."""
        delta, relative = deltas(value, reference)
        return self.check(
            value=value,
            reference=reference,
            delta=delta,
            relative_delta=relative,
            passed=passed,
            category=None if passed else category,
            message=f"{message} ({_delta_text(delta, relative, unit)})",
            **fields,
        )
