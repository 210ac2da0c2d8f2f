"""Two or more builds of the project, side by side in one script run: `rageval eval` on the
5M-row files and the warm `evaluate_bm25` re-run, alternating builds every round.

A build is a folder holding `rageval_pipeline/` and `pyproject.toml` (`--tree NAME=FOLDER`) or a
commit (`--commit NAME=REV`, checked out with `git worktree add --detach` into a temporary
folder, removed at the end). Each command runs as its own process with the build first on
`PYTHONPATH`, the console script as that build's pyproject declares it, each build
byte-compiled first (as `scripts/setup` does). The order of the builds rotates every round, so
the machine's other load falls on all alike; each figure is a list of every time and its median.
Run it `nice`d on a shared machine.

    nice -n 10 .venv/bin/python bench/side_by_side.py --commit before=f91ca8e --tree after=. \
        [--repeat 7] [--warm-rounds 5] [--dir /tmp/rageval-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from contextlib import ExitStack
from pathlib import Path

from eval_files import write_files  # bench/ is the script's own folder
from metrics import MEASURES
from warm_rerun import free_port

REPO = Path(__file__).resolve().parent.parent


def console_script(tree: Path) -> list[str]:
    """`rageval` as `tree`'s pyproject declares it (module:function), run by this Python."""
    target = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["scripts"]["rageval"]
    module, function = target.split(":")
    code = f"import sys; from {module} import {function}; sys.argv[0] = 'rageval'; "
    return [sys.executable, "-c", code + f"sys.exit({function}())"]


def seconds(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one process. CPU (user + system) moves less with the machine's
    other load than wall time, which also waits for a core."""
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%e %U %S", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    wall, user, system = map(float, done.stderr.strip().splitlines()[-1].split())
    return wall, user + system


def checkout(stack: ExitStack, rev: str) -> Path:
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rageval-rev-")))
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), rev],
        check=True,
        capture_output=True,
    )
    stack.callback(
        subprocess.run,
        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)],
        check=False,
        capture_output=True,
    )
    return folder


def builds(stack: ExitStack, commits: list[str], trees: list[str]) -> dict[str, Path]:
    """Every `--commit NAME=REV` (checked out) and `--tree NAME=FOLDER` by name, each
    byte-compiled as `scripts/setup` compiles an installed build."""
    out = {}
    for spec in commits + trees:
        name, _, where = spec.partition("=")
        out[name] = checkout(stack, where) if spec in commits else Path(where).resolve()
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(out[name] / "rageval_pipeline")],
            check=True,
            capture_output=True,
        )
    return out


def rotated(names: list[str], round_: int) -> list[str]:
    return names[round_ % len(names) :] + names[: round_ % len(names)]


def eval_times(trees: dict[str, Path], folder: Path, repeat: int) -> dict[str, list]:
    qrels, run = write_files(folder, 5000, 1000)
    measures = [flag for m in MEASURES for flag in ("-m", m)]
    files = (str(qrels.resolve()), str(run.resolve()))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    outputs = set()
    for round_ in range(repeat):
        for name in rotated(list(trees), round_):
            env = os.environ | {"PYTHONPATH": str(trees[name])}
            argv = [*console_script(trees[name]), "eval", *files, *measures]
            # Run in the build's folder: `python -c` puts the working folder first on sys.path,
            # ahead of PYTHONPATH, so from the repository every build would run its code.
            times[name].append(seconds(argv, env, cwd=trees[name]))
            if round_ == 0:
                done = subprocess.run(
                    argv, env=env, cwd=trees[name], capture_output=True, text=True, check=False
                )
                outputs.add(done.stdout)
    if len(outputs) != 1:
        sys.exit(f"the builds print different tables: {outputs}")
    return times


def warm_times(trees: dict[str, Path], archive: Path, rounds: int) -> dict[str, object]:
    """A cold `evaluate_bm25` on nfcorpus per build (own storage and instance), then warm
    re-runs, the builds alternating."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=archive.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dagster = str(Path(sys.executable).parent / "dagster")
    job = [
        dagster,
        "job",
        "execute",
        "-m",
        "rageval_pipeline",
        "-j",
        "evaluate_bm25",
        "--tags",
        json.dumps({"dagster/partition": "nfcorpus"}),
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="rageval-warm-") as tmp:
            envs = {}
            for name, tree in trees.items():
                work = Path(tmp) / name
                (work / "home").mkdir(parents=True)
                (work / "home" / "dagster.yaml").write_bytes((tree / "dagster.yaml").read_bytes())
                envs[name] = os.environ | {
                    "PYTHONPATH": str(tree),
                    "HF_HUB_OFFLINE": "1",
                    "DAGSTER_HOME": str(work / "home"),
                    "RAGEVAL_BEIR_MIRROR": f"http://127.0.0.1:{port}",
                    "RAGEVAL_STORAGE": str(work / "storage"),
                    "RAGEVAL_BASELINES": str(work / "baselines"),
                }
            time.sleep(0.5)  # let the mirror bind
            cold = {name: seconds(job, envs[name], Path(tmp))[0] for name in trees}
            warm: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
            for round_ in range(rounds):
                for name in rotated(list(trees), round_):
                    warm[name].append(seconds(job, envs[name], Path(tmp)))
    finally:
        server.terminate()
        server.wait()
    return {"cold_s": {k: round(v, 2) for k, v in cold.items()}, "warm": summary(warm)}


def summary(times: dict[str, list[tuple[float, float]]]) -> dict[str, dict[str, object]]:
    """Per build: median and every figure, wall and CPU seconds."""
    report = {}
    for name, pairs in times.items():
        wall, cpu = [w for w, _ in pairs], [c for _, c in pairs]
        report[name] = {
            "wall_median_s": round(statistics.median(wall), 2),
            "cpu_median_s": round(statistics.median(cpu), 2),
            "wall_s": [round(t, 2) for t in wall],
            "cpu_s": [round(t, 2) for t in cpu],
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--commit", action="append", default=[], metavar="NAME=REV")
    parser.add_argument("--repeat", type=int, default=7, help="`rageval eval` runs per build")
    parser.add_argument("--warm-rounds", type=int, default=5, help="0: no warm re-runs")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "rageval-bench")
    parser.add_argument("--zip", type=Path, default=Path("/work/shared/data/beir/nfcorpus.zip"))
    args = parser.parse_args()
    with ExitStack() as stack:
        trees = builds(stack, args.commit, args.tree)
        args.dir.mkdir(parents=True, exist_ok=True)
        report: dict[str, object] = {"load_average_before": os.getloadavg()}
        if args.repeat:
            report["eval_5M"] = summary(eval_times(trees, args.dir, args.repeat))
        if args.warm_rounds:
            report["warm_rerun"] = warm_times(trees, args.zip, args.warm_rounds)
        report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
