"""Issue 26: the MDE of a paired nDCG@10 delta on techdocs with and without LLM-judged queries.

Against the loopback OpenAI-compatible scripted judge of the tests (tests/scripted_judge.py,
which writes queries and grades passages from their content), through the real CLI:
`rageval synth` draws --n synthetic queries (round-trip and near-duplicate filtered) with a
seeded human sample, the sample's sheet is graded by the scripted "human" (other cut-offs than
the LLM's, as tests/test_labels_job.py does), and `rageval label` grades every pooled pair. The
per-query nDCG@10 of the two pooling systems (BM25 and, by --against, BM25 with k1 0.3, b 0.1,
a perturbed BM25, or the packaged MiniLM dense retriever) is then computed through the core APIs,
as the `ppi_verdict` asset does, and the paired delta's MDE is reported human-only (the sample)
and PPI++ (the sample plus every synthetic query LLM-judged), with the hand-written suite's
human-only MDE beside.

    PYTHONPATH=$PWD nice .venv/bin/python bench/ppi_mde.py [--n 400] [--human-sample 60] \
        [--depth 10] [--against bm25_flat|dense]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rageval_pipeline.core.curation.agreement import kappa
from rageval_pipeline.core.generation import labelling, synthetic
from rageval_pipeline.core.generation.calibration import per_query_values
from rageval_pipeline.core.generation.config import SWITCHES
from rageval_pipeline.core.statistics.paired import minimum_detectable_effect, paired_test
from rageval_pipeline.core.statistics.ppi import ppi_deltas
from rageval_pipeline.core.statistics.sampling import load_sample
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.systems import load_systems
from tests.llm_servers import FakeLLM
from tests.scripted_judge import grade_like_a_human, reply

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "data" / "suites" / "techdocs"
RAGEVAL = Path(sys.executable).parent / "rageval"
MEASURE = "nDCG@10"
REFERENCE = {"retriever": "bm25", "chunking": {"strategy": "reference"}}
DENSE = {"retriever": "dense", "model": "all-MiniLM-L6-v2", "chunking": {"strategy": "reference"}}
AGAINST = {"bm25_flat": {**REFERENCE, "k1": 0.3, "b": 0.1}, "dense": DENSE}


def cli(env: dict, *args: str) -> str:
    started = time.perf_counter()
    done = subprocess.run([str(RAGEVAL), *args], env=env, capture_output=True, text=True)
    print(f"$ rageval {' '.join(args[:2])} ... ({time.perf_counter() - started:.1f} s)")
    print(done.stdout + done.stderr)
    done.check_returncode()
    return done.stdout


def llm_grades(qrels: Path) -> dict[tuple[str, str], int]:
    rows = (line.split() for line in qrels.read_text().splitlines() if line.strip())
    return {(q, t): int(g) for q, _, t, g in rows}


def nested(values: dict[str, float]) -> dict[str, dict[str, float]]:
    return {q: {MEASURE: v} for q, v in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--human-sample", type=int, default=60)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--against", choices=sorted(AGAINST), default="bm25_flat")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    home = Path(tempfile.mkdtemp(prefix="ppi_mde_"))
    systems_file, storage = home / "systems.yaml", home / "storage"
    systems = {"bm25": REFERENCE, args.against: AGAINST[args.against]}
    systems_file.write_text(json.dumps({"systems": systems}))
    made, labels = home / "synthetic", home / "labels"
    common = ["--systems", str(systems_file), "--storage", str(storage), "--depth", str(args.depth)]
    fake = FakeLLM("openai", reply=reply).start()
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env |= {
        "RAGEVAL_PROVIDER": "openai",
        "RAGEVAL_OPENAI_BASE_URL": fake.url + "/v1",
        "RAGEVAL_OPENAI_MODEL": "fake-1",
        "RAGEVAL_CONCURRENCY": "4",
    }
    try:
        synth = [f"--n={args.n}", f"--human-sample-size={args.human_sample}", f"--seed={args.seed}"]
        cli(env, "synth", str(SUITE), *synth, "--output", str(made), *common)
        sheet = made / "techdocs.synthetic.sheet.jsonl"
        grade_like_a_human(sheet)
        companion_file = made / "techdocs.synthetic.jsonl"
        label = ["--synthetic", str(companion_file), "--human", str(sheet), "--output", str(labels)]
        cli(env, "label", str(SUITE), *label, *common)
    finally:
        fake.stop()
    print(f"load average after the CLI: {os.getloadavg()}; {len(fake.requests)} requests")

    suite, companion = load_suite(SUITE), synthetic.read_companion(companion_file)
    pooling = labelling.Pooling(
        systems=load_systems(systems_file),
        embeddings_dir=storage / "embeddings",
        base_dir=home,
    )
    _, ranks = labelling.pooled(suite, companion, pooling, args.depth)
    sample = load_sample(made / "sample.json")
    drawn, frame = sample.drawn(), sorted(sample.frame)
    sheet_grades, llm_labels = labelling.sheet_grades([sheet]), llm_grades(labels / "llm.qrels")
    human = per_query_values(ranks, sheet_grades, drawn, MEASURE)
    llm = per_query_values(ranks, llm_labels, frame, MEASURE)
    # The judge against the scripted human on the sample's pairs (an unparseable verdict: 0).
    pairs = sorted(sheet_grades)
    by_human, by_llm = [sheet_grades[p] for p in pairs], [llm_labels.get(p, 0) for p in pairs]
    print(
        f"sample pairs {len(pairs)}: weighted kappa (quadratic) "
        f"{kappa(by_human, by_llm, weights='quadratic'):.3f}, mean grade LLM - human "
        f"{np.mean(by_llm) - np.mean(by_human):+.3f}, LLM higher on "
        f"{np.mean(np.array(by_llm) > by_human):.1%}, lower on "
        f"{np.mean(np.array(by_llm) < by_human):.1%}"
    )
    [delta] = ppi_deltas(
        (nested(human["bm25"]), nested(human[args.against])),
        (nested(llm["bm25"]), nested(llm[args.against])),
        sample,
        [MEASURE],
    ).values()
    hand = [q.id for q in suite.queries if q.qrels]  # the answerable hand-written queries
    suite_values = per_query_values(ranks, labelling.human_grades(suite, []), hand, MEASURE)
    a, b = (np.array([suite_values[s][q] for q in hand]) for s in ("bm25", args.against))
    suite_test = paired_test(a, b)
    # The gate's MDE takes the larger of SD(B - A) and SD(A) (paired_test); PPI's the former.
    suite_diff_mde = minimum_detectable_effect(float(np.std(b - a, ddof=1)), len(hand))
    calibration = json.loads((labels / "calibration.json").read_text())
    print(f"synthetic queries kept: {len(companion)} of {args.n}; human sample {len(drawn)}")
    keys = ("kappa_quadratic", "pairs", "unparseable", "confusion", "kendall_tau", "checks")
    print(f"judge against the scripted human: {json.dumps({k: calibration[k] for k in keys})}")
    print(f"| population | queries judged by | n | delta {MEASURE} ({args.against} - bm25) | MDE |")
    print(
        f"| synthetic | humans only (sample) | {delta.n_human} | {delta.human_mean:+.4f} "
        f"[{delta.human_ci_low:+.4f}, {delta.human_ci_high:+.4f}] | {delta.mde_human:.4f} |"
    )
    print(
        f"| synthetic | PPI++: sample + LLM on all | {delta.n_human} of {delta.n_llm} "
        f"(effective {delta.effective_n:.0f}) | {delta.estimate:+.4f} "
        f"[{delta.ci_low:+.4f}, {delta.ci_high:+.4f}] | {delta.mde:.4f} |"
    )
    print(
        f"| hand-written suite | humans only | {suite_test.n} | {suite_test.delta:+.4f} "
        f"[{suite_test.ci_low:+.4f}, {suite_test.ci_high:+.4f}] | {suite_test.mde:.4f} "
        f"(gate's rule; from SD(B - A) alone {suite_diff_mde:.4f}) |"
    )
    print(f"load average at the end: {os.getloadavg()}; files in {home}")


if __name__ == "__main__":
    main()
