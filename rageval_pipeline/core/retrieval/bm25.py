"""BM25 over chunk text with bm25s (Lucene-style scoring), PyStemmer English stemming and
English stopwords, title prepended to the text as BEIR's baselines do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import Stemmer

from rageval_pipeline.core.io.ranking import top_k
from rageval_pipeline.core.retrieval.base import REBUILD_INDEX, Hit
from rageval_pipeline.core.storage.files import atomic_dir
from rageval_pipeline.core.storage.location import verified_dir

if TYPE_CHECKING:  # bm25s (and scipy under it) load on first use: `rageval validate` needs neither
    import bm25s

# Bump when the saved index or the scoring changes: it is part of the index's code version.
FORMAT_VERSION = "2"  # 2: written atomically with a manifest
_IDS_FILE = "ids.json"


def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


class BM25Index:
    """A bm25s index over a chunk table, searchable by query text."""

    def __init__(self, model: bm25s.BM25, ids: list[str], sources: list[str]) -> None:
        self.model = model
        self.ids = np.asarray(ids, dtype=object)
        self.sources = sources
        self._stemmer = _stemmer()

    @classmethod
    def build(cls, chunks: pd.DataFrame, *, k1: float = 1.5, b: float = 0.75) -> BM25Index:
        import bm25s
        from bm25s.tokenization import Tokenized

        texts = (chunks["title"].fillna("") + " " + chunks["text"].fillna("")).tolist()
        words = bm25s.tokenize(
            texts, stopwords="en", stemmer=_stemmer(), return_ids=False, show_progress=False
        )
        # Token ids in sorted order: bm25s numbers them in set order, which changes with each
        # process's string hashing, so the same chunks gave index files that differ byte for byte.
        vocab = {word: i for i, word in enumerate(sorted({w for doc in words for w in doc}))}
        model = bm25s.BM25(k1=k1, b=b)
        model.index(
            Tokenized(ids=[[vocab[w] for w in doc] for doc in words], vocab=vocab),
            show_progress=False,
        )
        return cls(model, chunks["chunk_id"].tolist(), chunks["doc_id"].tolist())

    def save(self, directory: Path) -> None:
        with atomic_dir(directory) as tmp:
            self.model.save(str(tmp))
            (tmp / _IDS_FILE).write_text(
                json.dumps({"ids": self.ids.tolist(), "sources": self.sources})
            )

    @classmethod
    def load(cls, directory: Path) -> BM25Index:
        import bm25s

        directory = verified_dir(directory, REBUILD_INDEX)  # on object storage, a local copy
        meta = json.loads((directory / _IDS_FILE).read_text())
        return cls(bm25s.BM25.load(str(directory)), meta["ids"], meta["sources"])

    def search(self, query: str, k: int) -> list[Hit]:
        import bm25s

        tokens = bm25s.tokenize(
            [query], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
        )[0]
        if not tokens:
            return []
        scores = self.model.get_scores(tokens)
        return [
            Hit(self.ids[i], float(scores[i]), self.sources[i])
            for i in top_k(scores, self.ids, k, positive_only=True)
        ]
