"""One shard's model throughput: padded batches of 32 (longest first, what `embed` did before)
against batches of one token length (what it does now, never padded). 400 nfcorpus passages
(seeded sample), the two ways interleaved over two rounds so the machine's load falls on both.

    nice python bench/length_batches.py /work/shared/data/beir/nfcorpus.zip
"""

import json
import random
import sys
import time
import zipfile

import numpy as np

from rageval_pipeline.core.retrieval import dense


def main(archive: str, n: int = 400) -> None:
    with zipfile.ZipFile(archive) as zf:
        lines = zf.read("nfcorpus/corpus.jsonl").decode().splitlines()
    rows = [json.loads(line) for line in lines]
    random.Random(0).shuffle(rows)
    texts = [(r.get("title", "") + " " + r["text"]).strip() for r in rows[:n]]
    model = dense.load_model()
    lengths = dense.token_lengths(model, texts)
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    ordered = [texts[i] for i in order]

    def padded() -> np.ndarray:
        return dense.encode_texts(model, ordered, 32)

    def by_length() -> np.ndarray:
        out, first = [], 0
        while first < n:
            end = first
            while end < n and end - first < 32 and lengths[order[end]] == lengths[order[first]]:
                end += 1
            out.append(dense.encode_passages(model, ordered[first:end]))
            first = end
        return np.vstack(out)

    padded()  # warm-up
    rates: dict[str, list[float]] = {"padded": [], "by-length": []}
    for _ in range(2):
        for name, encode in (("padded", padded), ("by-length", by_length)):
            start = time.perf_counter()
            encode()
            rates[name].append(round(n / (time.perf_counter() - start), 1))
    mean_tokens = round(sum(lengths) / n)
    print(rates, f"distinct lengths {len(set(lengths))}, mean tokens {mean_tokens}")


if __name__ == "__main__":
    main(sys.argv[1])
