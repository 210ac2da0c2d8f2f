"""Parallel against sequential steps: `evaluate_dataset` on one dataset (all configured systems:
bm25, dense, hybrid) with the in-process executor, then with the multiprocess executor
(deploy/run_config/multiprocess.yaml), alternating, each run on a fresh storage folder (cold
embedding cache) and a fresh Dagster instance. Prints one Markdown row per run; each run's log
goes to --logs.

    .venv/bin/python bench/parallel.py [--dataset techdocs] [--repeats 2] [--logs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MODES = {
    "in-process (sequential)": None,
    "multiprocess (parallel)": REPO / "deploy" / "run_config" / "multiprocess.yaml",
}


def evaluate(dataset: str, config: Path | None, log: Path) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="rageval-bench-") as tmp:
        home = Path(tmp) / "dagster_home"
        home.mkdir()
        shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "RAGEVAL_STORAGE": str(Path(tmp) / "storage"),
            "HF_HUB_OFFLINE": "1",
        }
        command = [str(BIN / "dagster"), "job", "execute", "-m", "rageval_pipeline"]
        command += ["-j", "evaluate_dataset", "--tags", json.dumps({"dagster/partition": dataset})]
        if config:
            command += ["-c", str(config)]
        started = time.perf_counter()
        result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        log.write_text(result.stdout + result.stderr)
        return seconds, result.returncode


def outcome(log: Path) -> str:
    """The gate's verdict line, or the failed steps, from a run's log."""
    text = log.read_text()
    failed = sorted(set(re.findall(r'STEP_FAILURE - Execution of step "([^"]+)"', text)))
    verdict = re.search(r"gate (PASS|FAIL) \([^)]*\): ([^\n]*)", text)
    gate = f"gate {verdict.group(1)}: {verdict.group(2)[:60]}" if verdict else "no gate"
    return gate + (f"; failed steps {', '.join(failed)}" if failed else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="techdocs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "rageval-bench")
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    print("| run | executor | wall-clock s | exit | outcome |")
    print("| --- | --- | --- | --- | --- |")
    for repeat in range(1, args.repeats + 1):
        for mode, config in MODES.items():
            log = args.logs / f"{repeat}-{mode.split()[0]}.log"
            seconds, code = evaluate(args.dataset, config, log)
            print(f"| {repeat} | {mode} | {seconds:.1f} | {code} | {outcome(log)} |", flush=True)


if __name__ == "__main__":
    main()
