"""`rageval pool export`'s clock against the actual time (bench/README.md, "`rageval pool`: the
clock").

Builds a 30-page folder in a temporary directory (techdocs' 21 pages and 9 copies with a
changed title), `rageval suite init` on it, 10 of techdocs' queries, then runs `rageval pool
export ... --embed` with the repo's systems plus the extras on a fresh storage, and prints:
sections, chunks to embed, the estimates (recorded, measured now) against the embedding's
actual seconds, every ETA line against the time its system's embedding actually had left
(error %), and the wall time. `--busy N` runs N busy loops for the run (a loaded machine);
`--storage DIR` keeps the storage (a second run then estimates by the recorded cost).

    .venv/bin/python bench/pool_clock.py [--busy 3] [--storage DIR]
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
            lines = run(argv, env)
            print(f"load average after: {os.getloadavg()}")
        finally:
            for process in busy:
                process.kill()
                process.wait()
    report(lines, len(suite["documents"]), sections)


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
