"""How a judgment target in a golden suite names a document or a chunk.

A target is a document id ("document level") or a chunk id `{doc}:chunk:{n}` ("chunk level"),
where `{doc}` is again matched against the document ids. Two modes:

- `exact`: the target equals a document id.
- `suffix`: the target may also be a trailing run of "/"-separated segments of a document id:
  `a.rs` matches `src/a.rs` but never `src/data.rs`. Only the target may be the shorter side
  (`src/a.rs` does not match a document `a.rs`). An exact match always wins; otherwise a suffix
  that matches more than one document is ambiguous.

Never substring matching: a near miss must fail loudly rather than credit the wrong document.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from rageval_pipeline.core.io.chunk_ids import chunk_id, split_chunk_id

MatchMode = Literal["exact", "suffix"]
Level = Literal["document", "chunk"]


class TargetError(ValueError):
    """A target that names no document or chunk, or more than one document."""


def matches(target: str, candidate: str, mode: MatchMode) -> bool:
    """Whether `target` names the document id `candidate` under `mode`."""
    if target == candidate:
        return True
    return mode == "suffix" and target != "" and candidate.endswith("/" + target)


def resolve(target: str, candidates: Collection[str], mode: MatchMode) -> str:
    """The one document id in `candidates` that `target` names; TargetError if none or several."""
    if target in candidates:
        return target
    found = sorted(c for c in candidates if matches(target, c, mode))
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(repr(c) for c in found[:3]) + (", ..." if len(found) > 3 else "")
        raise TargetError(f"ambiguous target {target!r}: matches {len(found)} documents ({shown})")
    rule = f"equals it or ends with '/{target}'" if mode == "suffix" else "equals it"
    raise TargetError(f"unknown target {target!r}: no document id {rule}")


def resolve_target(
    target: str, chunk_counts: Mapping[str, int], mode: MatchMode
) -> tuple[str, Level]:
    """The canonical id and level of a document or chunk target.

    `chunk_counts` maps every document id to its number of chunks under the reference chunking.
    """
    parts = split_chunk_id(target)
    if parts is None:
        return resolve(target, chunk_counts.keys(), mode), "document"
    doc, index = parts
    try:
        doc_id = resolve(doc, chunk_counts.keys(), mode)
    except TargetError as error:
        raise TargetError(f"chunk {target!r}: {error}") from None
    count = chunk_counts[doc_id]
    if index >= count:
        raise TargetError(
            f"unknown chunk {target!r}: document {doc_id!r} has {count} chunk(s), "
            f"numbered 0 to {count - 1}, under the reference chunking"
        )
    return chunk_id(doc_id, index), "chunk"
