"""`rageval pool export`'s clock against the actual time (bench/README.md, "`rageval pool`: the
clock").

Builds a 30-page folder in a temporary directory (techdocs' 21 pages and 9 copies with a
changed title), `rageval suite init` on it, 10 of techdocs' queries, then runs `rageval pool
export ... --embed` with the repo's systems plus the extras on a fresh storage, and prints:
sections, chunks to embed, the estimates (recorded, measured now) against the embedding's
actual seconds, every ETA line against the time its system's embedding actually had left
(error %), and the wall time. `--busy N` runs N busy loops for the run (a loaded machine);
`--storage DIR` keeps the storage (a second run then estimates by the recorded cost).

`--calls` instead times every model call of a pool's embedding one by one (the model warm):
the calibration's sample, then each dense system's calls in order; `--trace FILE` writes
them to FILE. `--replay FILE...` (or `--calls` itself) replays ETA rules on such traces
without running anything: after every call of each system's embedding, and on the lines the
shipped cadence prints (`embeddings._Tracker` on the calls' own clock), each rule's time left
against the seconds the calls actually had left. The prior of a system's ETA is what the run
records before it: the calibration's fit for the first, the previous system's fit after.

    .venv/bin/python bench/pool_clock.py [--busy 3] [--storage DIR]
    .venv/bin/python bench/pool_clock.py --calls [--busy 3] [--trace FILE]
    .venv/bin/python bench/pool_clock.py --replay FILE [FILE...]
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

from eta_rules import replay  # bench/ is the script's own folder

REPO = Path(__file__).resolve().parent.parent
TECHDOCS = REPO / "data" / "suites" / "techdocs"
RAGEVAL = str(Path(sys.executable).parent / "rageval")
ETA = re.compile(r"(\S+): embedded ([\d,]+)/([\d,]+) \(\d+%\), [\d.]+ docs/s, ETA (under )?(\d+) s")
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
    parser.add_argument("--trace", type=Path, help="with --calls: write the calls' times here")
    parser.add_argument("--replay", type=Path, nargs="+", help="replay the clock on traces")
    args = parser.parse_args()
    if args.replay:
        for path in args.replay:
            replay(json.loads(path.read_text()), path.name)
        return
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
                trace = {"busy": args.busy, "load_before": os.getloadavg()[0]}
                trace["started"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                trace |= every_call(suite_file, work / "calls")
                trace["load_after"] = os.getloadavg()[0]
                print(f"load average after: {os.getloadavg()}")
                if args.trace:
                    args.trace.write_text(json.dumps(trace) + "\n")
                replay(trace, "this run")
                return
            lines = run(argv, env)
            print(f"load average after: {os.getloadavg()}")
        finally:
            for process in busy:
                process.kill()
                process.wait()
    report(lines, len(suite["documents"]), sections)


def every_call(suite_file: Path, cache: Path) -> dict:
    """The model calls of a pool's embedding, timed one by one: `calibration`, the calls
    `embeddings.calibrate` times on all the systems' texts together (the warm-up first), then
    under `systems` every call each dense system's embedding makes, in its order (longest
    texts first); each call as (rows, tokens a row, seconds)."""
    from rageval_pipeline.core.curation import pool, pool_cost
    from rageval_pipeline.core.retrieval import dense, embedding_cost, embeddings
    from rageval_pipeline.core.suites.golden import load_suite
    from rageval_pipeline.core.systems import load_systems

    suite = load_suite(suite_file)
    systems = dict(load_systems(REPO / "data" / "systems.yaml")) | pool.extra_systems()
    todo = pool_cost.pending(suite, systems, cache)
    model = dense.load_model()

    def timed(texts: list[str], batch_size: int, picked=None) -> list[tuple[int, int, float]]:
        lengths = dense.token_lengths(model, texts)
        ordered = sorted(zip(lengths, texts, strict=True), key=lambda r: -r[0])
        spans = list(embedding_cost.runs([n for n, _ in ordered], batch_size))
        out = []
        for i in range(len(spans)) if picked is None else picked(len(spans)):
            first, end = spans[i]
            start = time.perf_counter()
            dense.encode_passages(model, [t for _, t in ordered[first:end]])
            out.append((end - first, ordered[first][0], time.perf_counter() - start))
        return out

    every = [t for keyed in todo.texts.values() for t in keyed.values()]
    first = systems[next(iter(todo.texts))].batch_size
    spread = lambda n: embeddings._spread(n, embeddings.CALIBRATION_CALLS)  # noqa: E731
    trace = {"calibration": timed(every, first, spread), "systems": {}}
    for name, keyed in todo.texts.items():
        trace["systems"][name] = timed(list(keyed.values()), systems[name].batch_size)
        calls = trace["systems"][name]
        print(f"{name}: {len(calls)} calls, {sum(c[2] for c in calls):.1f} s")
    return trace


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
    errors = []
    for at, text in lines:
        if (m := ETA.search(text)) and m[2] != m[3] and m[2] != "0":
            left, eta = ends[m[1]] - at, float(m[5])
            if m[4]:  # "under N s"
                verdict = "true" if left < eta else "false"
                print(
                    f"{m[1]}: at {at:6.1f} s {m[2]}/{m[3]}: ETA under {m[5]} s, "
                    f"actual {left:.1f} s ({verdict})"
                )
                continue
            errors.append(eta / left - 1 if left > 0 else float("inf"))
            print(
                f"{m[1]}: at {at:6.1f} s {m[2]}/{m[3]}: ETA {m[5]} s, actual {left:.1f} s "
                f"({100 * errors[-1]:+.0f}%)"
            )
    if errors:
        within = sum(abs(e) <= 0.3 for e in errors)
        print(f"numeric ETA lines within 30% of the time left: {within}/{len(errors)}")
    print(f"final line: {final[0] if final else None}")


if __name__ == "__main__":
    main()
