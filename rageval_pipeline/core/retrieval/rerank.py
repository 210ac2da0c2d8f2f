"""Reranking: re-score the top-n candidates of another system's run, query by query.

Two scorers: the packaged dense bi-encoder (cosine of normalised MiniLM vectors; passage vectors
come from the same embedding cache as dense retrieval, so re-scoring after one dense run embeds
nothing) and a cross-encoder loaded with sentence-transformers' `CrossEncoder` from a local
model folder. Re-scored candidates below `threshold` are dropped (the "rerank
threshold"); the rest are ordered the trec_eval way (score desc, id desc).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.io.ranking import order_run
from rageval_pipeline.core.retrieval import dense
from rageval_pipeline.core.retrieval.embeddings import EmbeddingCache, embed

BI_ENCODER = "bi-encoder"  # the packaged MiniLM, re-scoring by cosine similarity


class Scorer(Protocol):
    def prepare(self, ids: Sequence[str]) -> None:
        """Work shared by every query (e.g. passage vectors), done before timing starts."""

    def score(self, query: str, ids: Sequence[str]) -> np.ndarray:
        """One score per id for `query`; higher is better."""


def passages(corpus: pd.DataFrame, chunks: Sequence[pd.DataFrame]) -> dict[str, str]:
    """The text a reranker reads for each id a run can hold: every corpus document and every
    chunk of `chunks` (the corpus chunked as the candidates are), as title + " " + text (what
    dense retrieval embeds)."""
    frames = [corpus.assign(chunk_id=corpus["doc_id"]), *chunks]
    out: dict[str, str] = {}
    for frame in frames:
        out.update(zip(frame["chunk_id"], dense.passage_texts(frame), strict=True))
    return out


class BiEncoderScorer:
    def __init__(self, texts: Mapping[str, str], cache_dir: Path, *, batch_size: int = 32):
        self.texts = texts
        self.model = dense.load_model(dense.DEFAULT_MODEL, 256)
        self.cache = EmbeddingCache(cache_dir, dense.model_key(dense.DEFAULT_MODEL, 256))
        self.batch_size = batch_size
        self.vectors: dict[str, np.ndarray] = {}

    def _encode(self, texts: list[str]) -> np.ndarray:
        return dense.encode_texts(self.model, texts, self.batch_size)

    def prepare(self, ids: Sequence[str]) -> None:
        todo = sorted(set(ids) - set(self.vectors))
        texts = [self.texts[i] for i in todo]
        encode = functools.partial(dense.encode_passages, self.model)
        lengths = functools.partial(dense.token_lengths, self.model)
        matrix, _ = embed(texts, self.cache, encode, lengths=lengths, rows_per_call=self.batch_size)
        self.vectors.update(zip(todo, matrix, strict=True))

    def score(self, query: str, ids: Sequence[str]) -> np.ndarray:
        q = self._encode([query])[0].astype(np.float32)
        return np.stack([self.vectors[i] for i in ids]) @ q


class CrossEncoderScorer:
    def __init__(self, texts: Mapping[str, str], folder: Path, *, batch_size: int = 32):
        from sentence_transformers import CrossEncoder

        if not folder.is_dir():
            raise InputError(folder, "not a cross-encoder model folder", field="model")
        self.texts = texts
        self.model = CrossEncoder(str(folder), device="cpu")
        self.batch_size = batch_size

    def prepare(self, ids: Sequence[str]) -> None:
        """Nothing to share: a cross-encoder reads query and passage together."""

    def score(self, query: str, ids: Sequence[str]) -> np.ndarray:
        pairs = [(query, self.texts[i]) for i in ids]
        out = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(out, dtype=np.float64).reshape(len(ids))


def rerank(
    candidates: pd.DataFrame,
    queries: pd.DataFrame,
    scorer: Scorer,
    *,
    depth: int,
    threshold: float | None,
    k: int,
) -> pd.DataFrame:
    """The RUN of `candidates` (a RUN table) re-scored: per query its `depth` best candidates
    (in trec_eval order) get the scorer's score, those below `threshold` are dropped, the rest
    are cut to `k`. A query's latency is its candidates' latency plus its re-scoring time."""
    ordered = order_run(candidates)
    hits = ordered[ordered["doc_id"].notna() & (ordered["rank"] <= depth)]
    scorer.prepare(hits["doc_id"].tolist())
    # A run file may carry no latency: its re-scoring time is then the query's latency.
    first = ordered.groupby("query_id", sort=False)["latency_ms"].first().fillna(0.0)
    by_query = dict(tuple(hits.groupby("query_id", sort=False)))
    rows: list[dict] = []
    for query_id, text in zip(queries["query_id"], queries["text"].fillna(""), strict=True):
        group = by_query.get(query_id)
        start = time.perf_counter()
        scores = scorer.score(text, group["doc_id"].tolist()) if group is not None else []
        latency = float(first.get(query_id, 0.0)) + (time.perf_counter() - start) * 1000.0
        kept = [
            dict(query_id=query_id, doc_id=d, source_id=s, score=float(v), latency_ms=latency)
            for d, s, v in zip(
                group["doc_id"] if group is not None else [],
                group["source_id"] if group is not None else [],
                scores,
                strict=True,
            )
            if threshold is None or v >= threshold
        ]
        rows += kept or [
            dict(query_id=query_id, doc_id=None, source_id=None, score=None, latency_ms=latency)
        ]
    if not rows:
        return tables.empty(tables.RUN)
    run = order_run(pd.DataFrame.from_records(rows))
    run = run[run["rank"].isna() | (run["rank"] <= k)]
    return tables.conform(run, tables.RUN).to_pandas()
