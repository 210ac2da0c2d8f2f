"""What embedding costs on this machine: a model call's seconds as a fixed cost plus a cost per
token of its batch, fitted on calls as they are timed, and recorded beside an embedding cache.

Texts are embedded longest first in batches of one length (`embeddings`), so the short texts
come last in many small calls where the fixed cost is most of the time: a rate in texts (or
characters) a second measured on one set of texts is wrong for another (the same model ran at
37, 83 and 170 texts a second on three chunkings of one folder). The cost of a plan of calls
(rows, tokens a row) is `fixed_s` a call plus `per_token_s` a token; `tokens_per_char` lets an
estimate that has not loaded the tokenizer turn characters into tokens.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage.files import write_text

RATE_FILE = "rate.json"
# The time left is priced at the speed of the latest calls: a call's weight halves with every
# HALF_LIFE_S seconds of calls after it, and a call counts at most SPIKE times what the speed so
# far predicts for it. A shared machine's speed moves 2-20x between phases of tens of seconds
# (other jobs starting and stopping), and one call stalled by another job's time slice can take
# 20x its due (0.84 s for 0.04 s); the bound rises with the speed, so a slower phase still shows
# within a few calls. Replayed on every call of three pools timed one by one (bench/README.md,
# "`rageval pool`: the clock"), these did best of per-call, per-second, windowed and median
# memories, with no bound, 1.5x, 2x, 2.5x-10x; none is within 30% most of the time at load 4-8.
HALF_LIFE_S = 10.0
SPIKE = 2.0

Plan = list[tuple[int, int]]  # (rows, tokens a row) of each model call, in order


class Cost(BaseModel):
    """Seconds of a model call of `rows` texts of `tokens` each: fixed_s + per_token_s x rows x
    tokens; `tokens_per_char` turns characters into tokens where only characters are known."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    fixed_s: float = Field(ge=0, allow_inf_nan=False)
    per_token_s: float = Field(ge=0, allow_inf_nan=False)
    tokens_per_char: float = Field(gt=0, allow_inf_nan=False)

    def seconds(self, plan: Plan) -> float:
        return sum(self.fixed_s + self.per_token_s * rows * size for rows, size in plan)

    def scaled(self, factor: float) -> Cost:
        return self.model_copy(
            update={"fixed_s": self.fixed_s * factor, "per_token_s": self.per_token_s * factor}
        )


class Recorded(BaseModel):
    """rate.json: the cost the last embedding fitted here, when, and the load it ran under."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    cost: Cost
    recorded_at: float = Field(ge=0, allow_inf_nan=False)  # Unix time
    load_average: float = Field(ge=0, allow_inf_nan=False)  # 1-minute, when recorded


def read(directory: Path) -> Recorded | None:
    """The cost recorded in `directory` (None: none yet, or the texts-a-second rate an earlier
    version recorded, which says nothing of text lengths); anything else is refused."""
    path = directory / RATE_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(
            path, f"not JSON ({error}); delete it, the next embedding records it"
        ) from None
    if isinstance(raw, dict) and set(raw) == {"docs_per_s"}:
        return None
    try:
        return Recorded.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise InputError(
            path, f"{first['msg']}; delete it, the next embedding records it", field=field
        ) from None


def record(directory: Path, cost: Cost) -> None:
    entry = Recorded(cost=cost, recorded_at=time.time(), load_average=_load())
    write_text(directory / RATE_FILE, entry.model_dump_json())


def _load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # no load average on this platform
        return 0.0


def runs(sizes: Sequence[int], most: int) -> Iterator[tuple[int, int]]:
    """(first, end) of each run of equal sizes in `sizes`, cut every `most` rows: one batch
    that no text in it needs padding for."""
    first = 0
    for end in range(1, len(sizes) + 1):
        if end == len(sizes) or sizes[end] != sizes[first] or end - first == most:
            yield first, end
            first = end


def plan(lengths: Sequence[int], most: int) -> Plan:
    """The model calls `embeddings.embed` makes for texts of these lengths (tokens), at most
    `most` a call: longest first, runs of one length."""
    sizes = sorted(lengths, reverse=True)
    return [(end - first, sizes[first]) for first, end in runs(sizes, most)]


def approximate_lengths(texts: Sequence[str], cost: Cost, most_tokens: int) -> list[int]:
    """Token lengths estimated from characters (no tokenizer loaded), truncated as the model
    truncates."""
    return [min(max(1, round(len(t) * cost.tokens_per_char)), most_tokens) for t in texts]


class Fit:
    """Least squares of call seconds on tokens (rows x length), the first call left out once
    there are others (it pays the model's warm-up: 3 s a text where later calls took 0.4 s).
    Two fits: one where the latest calls weigh most (`HALF_LIFE_S`), for the time left of this
    embedding (a shared machine's speed changes by the minute), and one where all weigh alike,
    recorded for the next estimate (the last calls are the shortest texts: alone they say
    little of long ones).

    With a `prior` (a cost fitted before, on many calls), also the prior scaled to the speed
    measured now: seconds taken over seconds the prior predicts for the same calls. Under
    load a call's time varies 10x from one to the next (the other threads' time slices), so
    a few calls' own fit puts the fixed cost anywhere; their total, against the prior's shape,
    is steadier. The speed now counts each call at most `SPIKE` times its due at the speed
    before it."""

    def __init__(self, prior: Cost | None = None) -> None:
        self.calls, self.prior = 0, prior
        self.recent = np.zeros(7)  # n, sum x, sum y, sum x^2, sum xy, taken, predicted
        self.all = np.zeros(7)  # (x tokens, y seconds; predicted: by the prior)

    def add(self, rows: int, size: int, seconds: float) -> None:
        self.calls += 1
        if self.calls == 2:  # the first call (warm-up) is dropped for the second
            self.recent[:] = self.all[:] = 0.0
        x = float(rows * size)
        predicted = self.prior.seconds([(rows, size)]) if self.prior else 0.0
        terms = np.array((1.0, x, seconds, x * x, x * seconds, seconds, predicted))
        self.all += terms
        taken, due = self.recent[5:]
        terms[5] = min(seconds, SPIKE * predicted * (taken / due if due else 1.0))
        self.recent *= 0.5 ** (seconds / HALF_LIFE_S)
        self.recent += terms

    def scaled(self, *, recent: bool = True) -> Cost | None:
        """The prior at the speed measured on the calls so far (the prior alone before any
        call but the warm-up); None without a prior."""
        if self.prior is None:
            return None
        taken, predicted = (self.recent if recent else self.all)[5:]
        measured = predicted > 0 and self.calls > 1  # the warm-up call alone says nothing
        return self.prior.scaled(taken / predicted) if measured else self.prior

    def costs(self, *, recent: bool = True) -> tuple[float, float, bool]:
        """(fixed, per token, determinate): determinate when calls of different sizes were
        timed (else the time is taken as all per token)."""
        n, sx, sy, sxx, sxy = (self.recent if recent else self.all)[:5]
        spread = n * sxx - sx * sx
        if self.calls > 2 and spread > 1e-9 * n * sxx:
            per_token = max((n * sxy - sx * sy) / spread, 0.0)
            return max((sy - per_token * sx) / n, 0.0), per_token, True
        return 0.0, (sy / sx if sx else 0.0), False
