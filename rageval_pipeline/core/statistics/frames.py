"""The committed frame: the population of LLM-judged queries, fixed in a file when it is made.

The human sample's seed is the frame's commitment (`sampling.committed_seed`), but a frame is
easy to change: dropping one query gives a new seed, and a new draw. Twenty such frames were
all accepted, five of them passing a true drop the honest frame left inconclusive; the best of
20 brought PPI's coverage to 64.5%. So the frame is written once, beside the population, when
it is generated (`rageval synth` writes `frame.json` with the companion set), with the SHA-256
of its sorted ids, and committed with it. Every path that decides with PPI (`rageval gate
--llm-qrels`, the pipeline's companion set) refuses, in one line naming the ids added and
removed, a sampling record whose frame is not the committed one.

`{"version": 1, "sha256": "<frame_digest(frame)>", "frame": ["gen-0001", ...]}`
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.config import load_model, rule
from rageval_pipeline.core.statistics.sampling import HumanSample, frame_digest

FRAME_FILE = "frame.json"  # beside a companion set (and its sample.json)
FRAME_SUFFIX = ".frame.json"  # beside human qrels given on the command line


class CommittedFrame(BaseModel):
    """The frame as generated, with the SHA-256 of its sorted ids (one a line)."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    sha256: str
    frame: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _digest_matches(self) -> CommittedFrame:
        if self.sha256 != (digest := frame_digest(self.frame)):
            raise rule(
                ("sha256",),
                f"{self.sha256!r} is not the SHA-256 of the frame's ids ({digest}): the frame "
                "is written once, when the population is generated, and never edited",
            )
        return self


def commit_frame(frame: list[str], path: Path) -> CommittedFrame:
    """Write the frame of a newly generated population (sorted ids and their SHA-256)."""
    committed = CommittedFrame(sha256=frame_digest(frame), frame=sorted(frame))
    Path(path).write_text(committed.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return committed


def frame_path(qrels: str | Path) -> Path:
    """Where the committed frame of a human qrels file's population lives by default."""
    return Path(f"{qrels}{FRAME_SUFFIX}")


def load_frame(path: Path) -> CommittedFrame:
    """Read and validate a committed frame; a missing one is refused, naming the file."""
    if not Path(path).is_file():
        raise InputError(
            path,
            "no committed frame: PPI needs the population of LLM-judged queries fixed in a file "
            "when it was generated (`rageval synth` writes frame.json; docs/statistics.md)",
        )
    return load_model(Path(path), CommittedFrame)


def check_frame(sample: HumanSample, committed: CommittedFrame, *, where: str | Path) -> None:
    """Refuse, in one line, a sampling record whose frame is not the committed one: a changed
    frame commits to another seed, so it could be shopped for."""
    ours, theirs = set(sample.frame), set(committed.frame)
    if ours == theirs:
        return
    parts = []
    for label, ids in (("added", sorted(ours - theirs)), ("removed", sorted(theirs - ours))):
        if ids:
            parts.append(f"{label}: {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}")
    raise InputError(
        where,
        f"the sampling record's frame ({len(ours)} queries) is not the committed frame "
        f"({len(theirs)} queries, sha256 {committed.sha256[:16]}): {'; '.join(parts)}; a "
        "changed frame commits to another seed, so PPI refuses it",
        field="frame",
    )
