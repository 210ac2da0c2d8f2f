"""Retrievers: each answers `search(query, k)` with (id, score) pairs; `execute` makes a run."""

from rageval_pipeline.core.retrieval.base import Hit, Retriever, execute

__all__ = ["Hit", "Retriever", "execute"]
