"""Issue 35's figures, two builds side by side in one script run (bench/README.md).

- **definitions import**: CPU seconds (user + system) of `import rageval_pipeline.definitions`
  in a new process, best of `--repeat`; the later build also with no bytecode at all
  (`PYTHONPYCACHEPREFIX` an empty folder and `PYTHONDONTWRITEBYTECODE=1`: every module compiled
  in memory, as every process was before the dependencies were compiled).
- **gate step** on techdocs (bm25 only, its committed baseline): everything materialized once
  per build, then the gate alone in a new process, timed around its `materialize` (wall and
  CPU): cold (the plot cache emptied first: what the first storage on a machine pays) and warm.
- **a changed dense configuration's job** on techdocs: `dense` with `max_seq_length: 128`
  against its committed baseline (256), fresh storage and embedding cache, every asset of the
  partition materialized in one process: the baseline's configuration is timed beside it.

Builds: `--commit NAME=REV` (a temporary `git worktree`) or `--tree NAME=FOLDER`, alternating
every round. The machine's load average is printed before and after.

    .venv/bin/python bench/fast_feedback.py --commit before=4d0f010 --tree after=. [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from side_by_side import builds, rotated, seconds  # bench/ is the script's own folder

REPO = Path(__file__).resolve().parent.parent
# Run in a new process with a build first on PYTHONPATH: materialize `argv[1]` ("all" or one
# asset key) for techdocs and print the wall and CPU seconds of that call alone.
DRIVER = """
import json, sys, time
import dagster as dg
from rageval_pipeline.defs.definitions import build_definitions
defs = build_definitions()
selection = None if sys.argv[1] == "all" else [dg.AssetKey(sys.argv[1])]
wall, cpu = time.perf_counter(), time.process_time()
result = dg.materialize(list(defs.assets), selection=selection, partition_key="techdocs",
                        resources=defs.resources, raise_on_error=False)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"ok": result.success, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}))
"""


def home(folder: Path, systems: str) -> dict[str, str]:
    """A private data folder (techdocs, `systems`, the repo's gate policy and baselines) and
    storage: the environment of a build's runs."""
    data = folder / "data"
    shutil.copytree(REPO / "data" / "suites" / "techdocs", data / "suites" / "techdocs")
    shutil.copytree(REPO / "data" / "baselines", data / "baselines")
    shutil.copy(REPO / "data" / "gate.yaml", data / "gate.yaml")
    (data / "systems.yaml").write_text(systems)
    return {
        "RAGEVAL_DATA": str(data),
        "RAGEVAL_BASELINES": str(data / "baselines"),
        "RAGEVAL_STORAGE": str(folder / "storage"),
        "RAGEVAL_SCRATCH": str(folder / "scratch"),  # (the plot cache: emptied for a cold gate)
        "HF_HUB_OFFLINE": "1",
    }


def driven(tree: Path, env: dict[str, str], what: str, driver: str = DRIVER) -> dict:
    """The last line of `driver`'s output (JSON) run with `what` by the build in `tree`."""
    # Run in the build's folder: `python -c` puts the working folder first on sys.path, ahead
    # of PYTHONPATH, so from the repository every build would run the repository's code.
    done = subprocess.run(
        [sys.executable, "-c", driver, what],
        cwd=tree,
        env=os.environ | env | {"PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        sys.exit(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # "ok": False when the gate failed


BM25 = "systems:\n  bm25: {retriever: bm25, k1: 1.5, b: 0.75, chunking: {strategy: reference}}\n"
DENSE = (
    "systems:\n  dense: {retriever: dense, model: all-MiniLM-L6-v2, batch_size: 32,"
    " max_seq_length: 128, chunking: {strategy: reference}}\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--commit", action="append", default=[], metavar="NAME=REV")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dense-rounds", type=int, default=1, help="0: no dense job")
    args = parser.parse_args()
    report: dict[str, object] = {"load_average_before": os.getloadavg()}
    with ExitStack() as stack:
        trees = builds(stack, args.commit, args.tree)
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rageval-fast-")))
        empty = work / "no-bytecode"
        empty.mkdir()
        last = list(trees)[-1]
        variants = {name: {"PYTHONPATH": str(tree)} for name, tree in trees.items()}
        variants[f"{last}, no bytecode"] = variants[last] | {
            "PYTHONPYCACHEPREFIX": str(empty),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        imports: dict[str, list[float]] = {name: [] for name in variants}
        for round_ in range(args.repeat):
            for name in rotated(list(variants), round_):
                argv = [sys.executable, "-c", "import rageval_pipeline.definitions"]
                imports[name].append(seconds(argv, os.environ | variants[name])[1])
        report["definitions_import_cpu_s"] = {
            name: {"best": round(min(t), 2), "all": [round(x, 2) for x in t]}
            for name, t in imports.items()
        }

        envs = {name: home(work / f"gate-{name}", BM25) for name in trees}
        for name, tree in trees.items():
            driven(tree, envs[name], "all")
        gate: dict[str, dict[str, list]] = {n: {"cold": [], "warm": []} for n in trees}
        for round_ in range(args.repeat):
            for name in rotated(list(trees), round_):
                shutil.rmtree(Path(envs[name]["RAGEVAL_SCRATCH"]) / "cache" / "plots", True)
                gate[name]["cold"].append(driven(trees[name], envs[name], "gate"))
                gate[name]["warm"].append(driven(trees[name], envs[name], "gate"))
        report["gate_step"] = {
            name: {
                kind: {
                    "best_wall_s": min(f["wall_s"] for f in runs),
                    "best_cpu_s": min(f["cpu_s"] for f in runs),
                    "all": runs,
                }
                for kind, runs in kinds.items()
            }
            for name, kinds in gate.items()
        }
        dense: dict[str, list] = {name: [] for name in trees}
        for round_ in range(args.dense_rounds):
            for name in rotated(list(trees), round_):
                env = home(work / f"dense-{name}-{round_}", DENSE)
                dense[name].append(driven(trees[name], env, "all"))
        report["changed_dense_job"] = dense
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
