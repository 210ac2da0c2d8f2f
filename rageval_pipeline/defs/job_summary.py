"""What `scripts/evaluate` prints after its `dagster job execute`: the gate's summary, where
things are, and as the last line the verdict, or the first line that says why the job failed.

`python -m rageval_pipeline.defs.job_summary STORAGE DATASET LOG STATUS SINCE`: SINCE is
the job's start (Unix seconds); a `gate.json` older than that is a previous job's and not shown.
"""

import re
import sys
from pathlib import Path

from rageval_pipeline.core.gate import Verdict
from rageval_pipeline.core.report import short_summary
from rageval_pipeline.core.settings.folders import storage_location
from rageval_pipeline.core.storage.choose import open_warehouse

# What Dagster prints for a `dg.Failure` (expected errors and the gate's verdict, see failures.py).
_FAILURE = re.compile(r"^dagster\._core\.definitions\.events\.Failure: (.+)$")
# ... and what the project's console logger prints for it (failures.py, one_line.yaml).
_STEP_FAILED = re.compile(r' - STEP_FAILURE - Execution of step "[^"]+" failed: (.+)$')
# An exception's own line, e.g. "ValueError: query Q008 ..." (Dagster's wrappers excluded below).
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): (.+)$")
_WRAPPERS = ("dagster._core.errors.DagsterExecution", "dagster._core.errors.DagsterUserCode")
_ERROR_EVENT = re.compile(r" - ERROR - .* - ([^-]+?)$")


def verdict_line(dataset: str, verdict: Verdict) -> str:
    """`PASS techdocs: 3 run(s), ...` or `FAIL techdocs: 2 blocking failure(s) ...`."""
    state = "PASS" if verdict.passed else "FAIL"
    return f"{state} {dataset}: {verdict.summary.removeprefix(f'{state}: ')}"


def first_error(log: str) -> str | None:
    """The first line of a job's output that says what went wrong: a Failure's description,
    else an exception's message, else the first ERROR event's message, else the last line."""
    lines = [line.rstrip() for line in log.splitlines()]
    for line in lines:
        if match := _FAILURE.match(line) or _STEP_FAILED.search(line):
            return match.group(1)
    for line in lines:
        if _EXCEPTION.match(line) and not line.startswith(_WRAPPERS):
            return line
    for line in lines:
        if match := _ERROR_EVENT.search(line):
            return match.group(1)
    return next((line for line in reversed(lines) if line.strip()), None)


def summary(storage: Path, dataset: str, log: Path, status: int, since: float) -> str:
    """The lines scripts/evaluate prints, the verdict (or the first error) last."""
    reports = storage / "reports" / dataset / "latest"
    gate = reports / "gate.json"
    verdict = None
    if gate.is_file() and gate.stat().st_mtime >= since:
        verdict = Verdict.model_validate_json(gate.read_text(encoding="utf-8"))
    lines = [short_summary(verdict, reports), ""] if verdict is not None else []
    lines += [
        f"Dagster log:   {log}",
        f"Warehouse:     {open_warehouse(storage).location} (runs, run_metrics, query_metrics, "
        "group_metrics, latency, rankings, gate_results, experiments)",
        f"Parquet:       {storage}/tables/",
        f"Experiments:   {storage}/reports/experiments.json (rageval experiments)",
        f"Exit code:     {status}",
    ]
    if verdict is not None:
        lines.append(verdict_line(dataset, verdict))
    elif status != 0:
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        lines.append(f"FAIL {dataset} (before the gate): {first_error(text) or 'no output'}")
    else:
        lines.append(f"PASS {dataset}: the job succeeded (it has no gate)")
    return "\n".join(lines)


if __name__ == "__main__":
    storage_dir, name, log_file, code, started = sys.argv[1:6]
    print(summary(storage_location(storage_dir), name, Path(log_file), int(code), float(started)))
