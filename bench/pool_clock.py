"""`rageval pool export`'s clock against the actual time (bench/README.md, "`rageval pool`: the
clock").

Builds a 30-page folder in a temporary directory (techdocs' 21 pages and 9 copies with a
changed title), `rageval suite init` on it, 10 of techdocs' queries, then runs `rageval pool
export ... --embed` with the repo's systems plus the extras on a fresh storage, and prints:
sections, chunks to embed, the estimates (recorded, measured now) against the embedding's
actual seconds, every ETA line against the time its system's embedding actually had left
(error %), and the wall time. `--busy N` runs N busy loops for the run (a loaded machine);
`--storage DIR` keeps the storage (a second run then estimates by the recorded cost).

`--calls` instead times every model call of each dense system's embedding one by one (the
model warm) and replays the clock on them: the total as a calibration of 10 or 20 spread calls
estimates it (400 sample offsets), and the time left as the ETA predicts it (the cost fitted
on all calls, scaled to the speed of the calls so far, the latest weighing most) at every
third call: what noise a loaded machine leaves in either.

    .venv/bin/python bench/pool_clock.py [--busy 3] [--storage DIR] [--calls]
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

REPO = Path(__file__).resolve().parent.parent
TECHDOCS = REPO / "data" / "suites" / "techdocs"
RAGEVAL = str(Path(sys.executable).parent / "rageval")
ETA = re.compile(r"(\S+): embedded ([\d,]+)/([\d,]+) \(\d+%\), [\d.]+ docs/s, ETA (\d+) s")
ABOUT = re.compile(r"about (\d+) (s|min)")
FINAL = re.compile(r"embedded ([\d,]+) chunks in ([\d.]+) s \(estimated (\d+) (s|min)\)")


def folder(work: Path) -> Path:
    """techdocs' pages and 9 copies whose first heading says they are copies."""
    docs = work / "docs"
    shutil.copytree(TECHDOCS / "documents", docs)
    for page in sorted(docs.glob("*.md"))[:9]:
        text = page.read_text(encoding="utf-8")
        title, _, rest = text.partition("\n")
        (docs / f"copy-{page.name}").write_text(f"{title} (second edition)\n{rest}", "utf-8")
    return docs


def reference_sections(suite_file: Path) -> int:
    """Chunks of the suite's reference chunking: its sections."""
    from rageval_pipeline.core.suites.chunking import chunk_once
    from rageval_pipeline.core.suites.golden import load_suite
    from rageval_pipeline.core.suites.loaders import suite_tables

    suite = load_suite(suite_file)
    return len(chunk_once(suite_tables(suite).corpus, suite.chunking))


def seconds(match: re.Match) -> float:
    return float(match[1]) * (60 if match[2] == "min" else 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=0, help="busy loops run meanwhile")
    parser.add_argument("--storage", type=Path, help="storage to use (default: a fresh one)")
    parser.add_argument("--calls", action="store_true", help="time every call, replay the clock")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rageval-clock-") as tmp:
        work = Path(tmp)
        data = work / "data"
        init = [RAGEVAL, "suite", "init", str(folder(work)), "--name", "clock", "--data", str(data)]
        subprocess.run(init, check=True, capture_output=True)
        suite_file = data / "suites" / "clock" / "suite.json"
        suite = json.loads(suite_file.read_text())
        techdocs = json.loads((TECHDOCS / "suite.json").read_text())["queries"][:10]
        suite["queries"] = [
            {"id": q["id"], "query": q["query"], "intent": q["intent"]} for q in techdocs
        ]
        suite_file.write_text(json.dumps(suite, indent=2) + "\n")
        sections = reference_sections(suite_file)
        env = os.environ | {
            "RAGEVAL_STORAGE": str(args.storage or work / "storage"),
            "RAGEVAL_SCRATCH": str(work / "scratch"),
            "HF_HUB_OFFLINE": "1",
        }
        argv = [RAGEVAL, "pool", "export", str(suite_file.parent), "-o", str(work / "s.csv")]
        argv += ["--embed", "--systems", str(REPO / "data" / "systems.yaml")]
        busy = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)
        ]
        try:
            print(f"load average before: {os.getloadavg()}, busy loops: {args.busy}")
            if args.calls:
                replay(every_call(suite_file, work / "calls"))
                print(f"load average after: {os.getloadavg()}")
                return
            lines = run(argv, env)
            print(f"load average after: {os.getloadavg()}")
        finally:
            for process in busy:
                process.kill()
                process.wait()
    report(lines, len(suite["documents"]), sections)


def every_call(suite_file: Path, cache: Path) -> dict[str, list[tuple[int, int, float]]]:
    """(rows, tokens a row, seconds) of every model call each dense system's embedding makes,
    in its order (longest texts first), timed one by one after a warm-up call."""
    from rageval_pipeline.core.curation import pool, pool_cost
    from rageval_pipeline.core.retrieval import dense, embedding_cost
    from rageval_pipeline.core.suites.golden import load_suite
    from rageval_pipeline.core.systems import load_systems

    suite = load_suite(suite_file)
    systems = dict(load_systems(REPO / "data" / "systems.yaml")) | pool.extra_systems()
    todo = pool_cost.pending(suite, systems, cache)
    model = dense.load_model()
    dense.encode_passages(model, ["a warm-up", "call"])
    calls = {}
    for name, keyed in todo.texts.items():
        texts = list(keyed.values())
        lengths = dense.token_lengths(model, texts)
        ordered = sorted(zip(lengths, texts, strict=True), key=lambda r: -r[0])
        calls[name], first = [], 0
        for rows, size in embedding_cost.plan([n for n, _ in ordered], systems[name].batch_size):
            start = time.perf_counter()
            dense.encode_passages(model, [t for _, t in ordered[first : first + rows]])
            calls[name].append((rows, size, time.perf_counter() - start))
            first += rows
        print(f"{name}: {len(calls[name])} calls, {sum(c[2] for c in calls[name]):.1f} s")
    return calls


def replay(calls: dict[str, list[tuple[int, int, float]]]) -> None:
    import numpy as np

    every = [c for system in calls.values() for c in system]
    every.sort(key=lambda c: -c[1])
    x = np.array([rows * size for rows, size, _ in every], float)
    t = np.array([seconds for _, _, seconds in every])
    features = np.c_[np.ones(len(x)), x]
    shape = np.maximum(np.linalg.lstsq(features, t, rcond=None)[0], 0)
    print(f"{len(t)} calls, {t.sum():.1f} s; fixed {shape[0]:.4f} s + {shape[1]:.2e} s a token")
    rng = np.random.default_rng(0)
    for k in (10, 20):
        errors = []
        for _ in range(400):
            picked = np.floor((np.arange(k) + rng.uniform()) * len(t) / k).astype(int)
            fit = np.linalg.lstsq(features[picked], t[picked], rcond=None)[0]
            errors.append((features @ np.maximum(fit, 0)).sum() / t.sum() - 1)
        summary(f"estimate from {k} spread calls", errors)
    errors = []
    for system in calls.values():
        x = np.array([rows * size for rows, size, _ in system], float)
        seconds = np.array([s for _, _, s in system])
        predicted = shape[0] + shape[1] * x
        for i in range(3, len(system) - 3, 3):
            weights = 0.8 ** np.arange(i - 1, 0, -1)  # calls 1..i-1, the warm-up left out
            speed = (weights * seconds[1:i]).sum() / (weights * predicted[1:i]).sum()
            errors.append(speed * predicted[i:].sum() / seconds[i:].sum() - 1)
    summary("ETA at every third call", errors)


def summary(what: str, errors: list[float]) -> None:
    import numpy as np

    size = np.abs(errors)
    print(
        f"{what}: |error| median {100 * np.median(size):.0f}%, 90th percentile "
        f"{100 * np.percentile(size, 90):.0f}%, median error {100 * np.median(errors):+.0f}%"
    )


def run(argv: list[str], env: dict[str, str]) -> list[tuple[float, str]]:
    """Each stderr line of the run with the seconds since it started, as it arrived."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:
        lines.append((time.perf_counter() - start, line.rstrip("\n")))
        print(f"  [{lines[-1][0]:6.1f} s] {lines[-1][1]}")
    lines.append((time.perf_counter() - start, f"exit {process.wait()}"))
    return lines


def report(lines: list[tuple[float, str]], documents: int, sections: int) -> None:
    wall = lines[-1][0]
    print(f"\n{documents} documents, {sections} sections; wall {wall:.1f} s")
    final = next((FINAL.search(text) for _, text in lines if FINAL.search(text)), None)
    actual = float(final[2]) if final else None
    for _, text in lines:
        if text.startswith("pool: ") and (about := ABOUT.search(text)):
            kind = "measured" if "measured now" in text else "recorded (+ model load)"
            error = f"{100 * (seconds(about) / actual - 1):+.0f}%" if actual else "?"
            print(f"estimate {kind}: {seconds(about):.0f} s against {actual} s actual: {error}")
    ends = {}
    for at, text in lines:
        if (m := ETA.search(text)) and m[2] == m[3]:
            ends[m[1]] = at
    for at, text in lines:
        if (m := ETA.search(text)) and m[2] != m[3] and m[2] != "0":
            left = ends[m[1]] - at
            error = 100 * (float(m[4]) / left - 1) if left > 0 else float("nan")
            print(
                f"{m[1]}: at {at:6.1f} s {m[2]}/{m[3]}: ETA {m[4]} s, actual {left:.1f} s "
                f"({error:+.0f}%)"
            )
    print(f"final line: {final[0] if final else None}")


if __name__ == "__main__":
    main()
