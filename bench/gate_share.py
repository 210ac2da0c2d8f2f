"""The gate step's share of a cold techdocs BM25 job (bench/README.md, "The gate's figures").

Each round, per build: the `evaluate_bm25` job on techdocs (bm25 only, the repo's gate policy
and committed baselines) in a new process on a FRESH storage, twice: the shared plot cache
(`$RAGEVAL_SCRATCH/cache/plots`) emptied first (cold), then left as that run filled it (warm).
Each step's duration is read from the run's event log (STEP_START to STEP_SUCCESS or
STEP_FAILURE); printed: the gate step's seconds, the summed step seconds and the gate's share,
and for a build that draws the figures in a step of their own (`report_figures`) that step's
seconds and the share of gate and figures together. A build from before the cache moved out of
the storage draws every figure on a fresh storage either way.

    .venv/bin/python bench/gate_share.py --commit before=5a9d126 --tree after=. [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from fast_feedback import BM25, driven, home  # bench/ is the script's own folder
from side_by_side import builds, rotated

# Run in a new process with a build first on PYTHONPATH: the job, then each step's seconds.
DRIVER = """
import json
import dagster as dg
from rageval_pipeline.defs.definitions import build_definitions
instance = dg.DagsterInstance.ephemeral()
job = build_definitions().get_job_def("evaluate_bm25")
result = job.execute_in_process(partition_key="techdocs", instance=instance, raise_on_error=False)
starts, steps = {}, {}
for entry in instance.all_logs(result.run_id):
    event = entry.dagster_event
    if event is None:
        continue
    if event.event_type_value == "STEP_START":
        starts[entry.step_key] = entry.timestamp
    elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
        steps[entry.step_key] = round(entry.timestamp - starts[entry.step_key], 3)
print(json.dumps({"ok": result.success, "steps": steps}))
"""


def job(tree: Path, env: dict[str, str]) -> dict:
    out = driven(tree, env, "the job", DRIVER)
    steps = out["steps"]
    total = sum(steps.values())
    figures = steps.get("report_figures", 0.0)  # a build drawing in the gate step: none
    return {
        "ok": out["ok"],
        "gate_s": steps["gate"],
        "figures_s": figures,
        "steps_s": round(total, 2),
        "share": round(steps["gate"] / total, 3),
        "with_figures_share": round((steps["gate"] + figures) / total, 3),
        "steps": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--commit", action="append", default=[], metavar="NAME=REV")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    report: dict[str, object] = {"load_average_before": os.getloadavg()}
    with ExitStack() as stack:
        trees = builds(stack, args.commit, args.tree)
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rageval-share-")))
        runs: dict[str, dict[str, list]] = {n: {"cold": [], "warm": []} for n in trees}
        for round_ in range(args.repeat):
            for name in rotated(list(trees), round_):
                for kind in ("cold", "warm"):
                    folder = work / f"{name}-{round_}-{kind}"
                    env = home(folder, BM25)
                    env["RAGEVAL_SCRATCH"] = str(work / f"scratch-{name}")  # shared by its runs
                    if kind == "cold":
                        shutil.rmtree(Path(env["RAGEVAL_SCRATCH"]) / "cache" / "plots", True)
                    runs[name][kind].append(job(trees[name], env))
                    shutil.rmtree(folder)
                    last = runs[name][kind][-1]
                    print(
                        f"{name} {kind}: gate {last['gate_s']} s, figures {last['figures_s']} s "
                        f"of {last['steps_s']} s (share {last['share']}, with the figures "
                        f"{last['with_figures_share']})",
                        file=sys.stderr,
                        flush=True,
                    )
        report["gate_share"] = {
            name: {
                kind: {
                    "median_share": statistics.median(r["share"] for r in rs),
                    "max_share": max(r["share"] for r in rs),
                    "median_with_figures_share": statistics.median(
                        r["with_figures_share"] for r in rs
                    ),
                    "median_gate_s": statistics.median(r["gate_s"] for r in rs),
                    "median_figures_s": statistics.median(r["figures_s"] for r in rs),
                    "median_steps_s": statistics.median(r["steps_s"] for r in rs),
                    "all": rs,
                }
                for kind, rs in kinds.items()
            }
            for name, kinds in runs.items()
        }
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
