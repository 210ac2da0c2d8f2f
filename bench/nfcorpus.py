"""The nfcorpus test split read straight from the official BEIR zip, for the benches.

Pandas and the standard library only, so a bench timing a bare script pays no pipeline import.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pandas as pd


def read_nfcorpus(archive: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, int]]]:
    """Corpus, test queries and test qrels straight from the official BEIR zip."""
    with zipfile.ZipFile(archive) as zf:
        corpus = pd.read_json(io.BytesIO(zf.read("nfcorpus/corpus.jsonl")), lines=True, dtype=str)
        queries = pd.read_json(io.BytesIO(zf.read("nfcorpus/queries.jsonl")), lines=True, dtype=str)
        qrels_df = pd.read_csv(io.BytesIO(zf.read("nfcorpus/qrels/test.tsv")), sep="\t", dtype=str)
    qrels: dict[str, dict[str, int]] = {}
    for qid, did, rel in qrels_df.itertuples(index=False):
        qrels.setdefault(qid, {})[did] = int(rel)
    corpus = corpus.rename(columns={"_id": "doc_id"}).assign(url="", metadata="{}")
    queries = queries.rename(columns={"_id": "query_id"})
    return corpus, queries[queries["query_id"].isin(qrels)], qrels
