"""The recorded random draw of the human-judged queries that prediction-powered inference needs.

PPI's interval is valid only when the human-judged queries are a uniform random sample of the
population its estimate is about (docs/statistics.md). So the draw is recorded, not asserted: a
`HumanSample` names the frame (every query id of the population), the seed and the sample size,
and the human-judged queries must be exactly the seeded draw from that frame. A hand-picked
subset, or one judged beyond the draw, is refused.

The seed is not a choice: it is the frame's commitment (`committed_seed`, 31 bits of the SHA-256
of its sorted ids), fixed before any label exists. A free seed could be shopped for:
drawing 20 seeded samples and keeping the one whose human values suit you passes every check of
the draw, yet the PPI interval's coverage falls to 78.5% (docs/statistics.md). A record whose
seed is not the frame's, or is not a JSON integer (`"7"`), is refused.

The record is a JSON file beside the human qrels, `<qrels>.sample.json` by default:
`{"version": 1, "seed": <committed_seed(frame)>, "size": 60, "frame": ["q1", "q2", ...]}`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.config import load_model, rule

SAMPLE_SUFFIX = ".sample.json"


class HumanSample(BaseModel):
    """A seeded uniform draw of `size` query ids, without replacement, from `frame`."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    seed: StrictInt = Field(ge=0, description="the frame's `committed_seed`")
    size: StrictInt = Field(ge=2, description="how many queries were drawn for human judging")
    frame: list[Annotated[str, Field(min_length=1)]] = Field(
        description="every query id of the population, each once"
    )

    @model_validator(mode="after")
    def _frame_holds_the_draw(self) -> HumanSample:
        seen: set[str] = set()
        for query in self.frame:
            if query in seen:
                raise rule(("frame",), f"lists the query id {query!r} more than once")
            seen.add(query)
        if self.size >= len(self.frame):  # PPI needs queries that only the LLM judged
            raise rule(("size",), f"{self.size} leaves no query of the {len(self.frame)} for PPI")
        if self.seed != (committed := committed_seed(self.frame)):
            raise rule(
                ("seed",),
                f"{self.seed} is not the seed this frame commits to ({committed}, from the "
                "SHA-256 of its sorted ids): a seed chosen by hand could be the best of many "
                "draws, which makes PPI's interval invalid; redraw with `rageval synth`",
            )
        return self

    def drawn(self) -> list[str]:
        """The sampled query ids, sorted. The frame is sorted first, so its order in the file
        does not change the draw; the same seed and frame always draw the same queries."""
        frame = sorted(self.frame)
        picks = np.random.default_rng(self.seed).choice(len(frame), self.size, replace=False)
        return sorted(frame[i] for i in picks)

    def frame_digest(self) -> str:
        """SHA-256 of the sorted frame ids, one a line: names the population in reports."""
        return frame_digest(self.frame)


def frame_digest(frame: list[str]) -> str:
    """SHA-256 of the sorted ids, one a line."""
    return hashlib.sha256("".join(f"{q}\n" for q in sorted(frame)).encode()).hexdigest()


def committed_seed(frame: list[str]) -> int:
    """The one seed a frame may be drawn with: 31 bits of its digest (the warehouse stores it
    as an INTEGER), so the draw is fixed by the population before any query is judged."""
    return int(frame_digest(frame)[:8], 16) & 0x7FFF_FFFF


def draw_sample(frame: list[str], size: int) -> HumanSample:
    """The record of a new draw with the frame's committed seed (what `rageval synth` writes
    for human judging)."""
    return HumanSample(seed=committed_seed(frame), size=size, frame=sorted(frame))


def write_sample(sample: HumanSample, path: Path) -> None:
    Path(path).write_text(sample.model_dump_json(indent=2) + "\n", encoding="utf-8")


def sample_path(qrels: str | Path) -> Path:
    """Where the record of a human qrels file's draw lives by default: beside it."""
    return Path(f"{qrels}{SAMPLE_SUFFIX}")


def load_sample(path: Path) -> HumanSample:
    """Read and validate a sampling record; InputError names the file, line and field."""
    if not Path(path).is_file():
        raise InputError(
            path,
            "no sampling record: PPI needs the human-judged queries to be a recorded random "
            "draw (seed, size and frame; docs/statistics.md)",
        )
    return load_model(Path(path), HumanSample)


def check_sample(
    sample: HumanSample,
    human_queries: set[str],
    llm_queries: set[str],
    *,
    where: str | Path,
    llm_where: str | Path,
) -> None:
    """Refuse, in one line, human judgments that are not the recorded draw, or LLM judgments
    that do not cover the frame: either would make the PPI interval invalid."""
    check_drawn(sample, human_queries, where=where)
    if uncovered := sorted(set(sample.frame) - llm_queries):
        raise InputError(
            llm_where,
            f"{len(uncovered)} of the {len(sample.frame)} queries of the sampling frame have "
            f"no LLM judgment (first: {uncovered[0]}); LLM qrels must cover the whole population",
        )


def check_drawn(sample: HumanSample, human_queries: set[str], *, where: str | Path | None) -> None:
    """Refuse, in one line, human-judged queries that are not exactly the recorded draw (judged
    but not drawn, or drawn but not judged). Every path that decides with PPI runs it."""
    drawn = set(sample.drawn())
    if human_queries != drawn:
        extra, missing = sorted(human_queries - drawn), sorted(drawn - human_queries)
        detail = "; ".join(
            f"{label}: {', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}"
            for label, ids in (("judged but not drawn", extra), ("drawn but not judged", missing))
            if ids
        )
        raise InputError(
            where,
            f"the human-judged queries are not the recorded random draw ({sample.size} of "
            f"{len(sample.frame)}, seed committed by the frame): {detail}; PPI needs a random "
            "human sample",
        )
