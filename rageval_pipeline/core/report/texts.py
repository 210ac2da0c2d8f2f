"""The words a person reads beside the ids: query texts and snippets of the listed targets.

`report_texts` builds a `ReportTexts` from a suite's queries table (query_id, text) and a
targets table: the corpus (doc_id, text) for document-level judgments, or a chunks table
(chunk_id, text) for chunk-level ones. Texts are corpus data: they are bounded here, and each
rendering escapes them (`core.report.blocks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import pandas as pd

SNIPPET = 200  # characters of a target's text shown beside its id
QUERY_TEXT = 300  # a query longer than this is cut: a query is a line, not a document

TargetId = Literal["doc_id", "chunk_id"]


class ReportTexts(BaseModel):
    """dataset -> query id -> query text, and dataset -> target id -> snippet."""

    queries: dict[str, dict[str, str]] = Field(default_factory=dict)
    targets: dict[str, dict[str, str]] = Field(default_factory=dict)

    def query(self, dataset: str, query_id: str) -> str | None:
        return self.queries.get(dataset, {}).get(query_id)

    def target(self, dataset: str, target_id: str) -> str | None:
        return self.targets.get(dataset, {}).get(target_id)

    def merged(self, other: ReportTexts) -> ReportTexts:
        """Both texts; `other` wins where both know an id (the gate checks several datasets)."""

        def merge(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]):
            return {d: a.get(d, {}) | b.get(d, {}) for d in sorted(set(a) | set(b))}

        return ReportTexts(
            queries=merge(self.queries, other.queries), targets=merge(self.targets, other.targets)
        )


def shorten(text: str, limit: int) -> str:
    """`text` on one line (runs of whitespace become one space), cut to `limit` characters with
    an ellipsis when longer."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _column(frame: pd.DataFrame, key: str, limit: int, ids: set[str] | None) -> dict[str, str]:
    missing = [c for c in (key, "text") if c not in frame.columns]
    if missing:
        raise ValueError(f"report texts: the table has no column {missing[0]!r}")
    # Rows first, then columns: a large corpus's texts are never copied whole.
    rows = frame[frame[key].isin(ids)] if ids is not None else frame
    pairs = rows[[key, "text"]].dropna()
    return {
        str(k): shorten(v, limit) for k, v in sorted(zip(pairs[key], pairs["text"], strict=True))
    }


def report_texts(
    dataset: str,
    queries: pd.DataFrame,
    targets: pd.DataFrame | None = None,
    *,
    target_id: TargetId = "doc_id",
    ids: set[str] | None = None,
) -> ReportTexts:
    """The texts of one dataset: each query's text, and a `SNIPPET`-character snippet of each
    target (keyed by `target_id`: "doc_id" for a corpus, "chunk_id" for chunks). `ids` keeps
    only the targets a report can list (e.g. the ids in the runs' and baselines' top 10), so a
    large corpus is not copied into the report."""
    return ReportTexts(
        queries={dataset: _column(queries, "query_id", QUERY_TEXT, None)},
        targets={dataset: _column(targets, target_id, SNIPPET, ids)} if targets is not None else {},
    )


def listed_ids(summaries, baselines) -> dict[str, set[str]]:
    """dataset -> every id in a top 10 of the runs (`RunSummary`s) and of the baselines: the
    targets a report can name, to pass as `report_texts(..., ids=...)`."""
    out: dict[str, set[str]] = {}
    for item in (*summaries, *baselines):
        out.setdefault(item.dataset, set()).update(d.id for top in item.top.values() for d in top)
    return out
